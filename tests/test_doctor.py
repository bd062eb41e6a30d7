"""The paste box, driven as a user would: type text, click Diagnose, read the answer."""
import pytest

from nbhelpers.scenarios.probe import probe
from nbhelpers.views.pastebox import findings_html, findings_table, paste_box


@pytest.mark.integration
def test_paste_box_diagnoses_real_log_text(runs_dir):
    res = probe(2, timeout=3, size_mb=1, fault="never-join", stall=60, live=False)
    box = paste_box()
    box.button.click()
    assert "Nothing pasted" in box.answer.value
    box.area.value = res.log(0, tail=None)
    box.button.click()
    assert "rendezvous_timeout" in box.answer.value and "What to do" in box.answer.value
    assert "notebook 01" in box.answer.value


def test_findings_views_of_nothing_and_of_findings():
    assert "No known failure" in findings_html([])
    interfaces = "h:1:1 [0] NCCL INFO Bootstrap : Using [0]eno4:10.3.68.117<0> [1]veth9:fe80::a86b%veth9<0>\n"
    assert "Worth a look" in findings_html([], text=interfaces) and "veth9" in findings_html([], text=interfaces)
    from nbhelpers.runtime.learned import classify

    f = classify("RuntimeError: The server socket has failed to listen on any local network address. "
                 "port: 29500, useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use")
    df = findings_table(f)
    assert df.loc[0, "category"] == "port_in_use" and "line 1" in df.loc[0, "first evidence"]
