import socket

import pytest

from nbhelpers.errors import PortInUseError, WorkbookError
from nbhelpers.runtime.ports import check_port, free_port, port_in_use, port_owner


def test_free_port_is_free():
    p = free_port()
    assert not port_in_use(p)
    check_port(p)


def test_a_listening_squatter_is_detected_with_its_owner():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert port_in_use(port)
        assert "pid" in (port_owner(port) or "")
        with pytest.raises(PortInUseError) as err:
            check_port(port)
    assert isinstance(err.value, WorkbookError)
    assert err.value.port == port and "What to do" in str(err.value)
