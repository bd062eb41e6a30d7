import subprocess
import sys
import time

import psutil
import pytest

from nbhelpers.runtime.procs import stop_tree

STUBBORN = ("import signal, subprocess, sys, time\n"
            "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "subprocess.Popen([sys.executable, '-c', 'import signal,time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
            " time.sleep(600)'], start_new_session=True)\n"
            "time.sleep(600)")


@pytest.mark.integration
def test_stop_tree_kills_a_tree_that_ignores_term_including_other_sessions():
    p = subprocess.Popen([sys.executable, "-c", STUBBORN], start_new_session=True)
    root = psutil.Process(p.pid)
    for _ in range(100):
        if root.children():
            break
        psutil.wait_procs([], timeout=0.1)
    tree = [root, *root.children(recursive=True)]
    assert len(tree) == 2
    out = stop_tree(root, grace=1.0)
    p.wait(5)
    assert out["killed"] == 2 and out["processes"] == 2
    assert not [q for q in tree[1:] if q.is_running() and q.status() != psutil.STATUS_ZOMBIE]
    assert not root.is_running() or root.status() == psutil.STATUS_ZOMBIE


def test_signals_deferred_holds_an_interrupt_until_the_block_ends():
    import os
    import signal

    from nbhelpers.runtime.procs import signals_deferred

    done = []
    with pytest.raises(KeyboardInterrupt):
        with signals_deferred():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.2)   # the handler would have raised here
            done.append("block ran to its end")
    assert done == ["block ran to its end"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back
