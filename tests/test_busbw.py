"""nccl-tests' size and bandwidth arithmetic."""
import pytest

from nbhelpers.diagnosis.busbw import (
    bus_factor,
    expected_seconds,
    human,
    normalize_op,
    op_size_bytes,
    parse_size,
    size_range,
)


def test_bus_factors_follow_nccl_tests():
    assert bus_factor("all_reduce", 2) == 1.0
    assert bus_factor("all_reduce", 8) == pytest.approx(1.75)
    assert bus_factor("all_gather", 4) == pytest.approx(0.75)
    assert bus_factor("reduce_scatter", 4) == pytest.approx(0.75)
    assert bus_factor("broadcast", 16) == 1.0


@pytest.mark.parametrize("printed,op", [("ALLREDUCE", "all_reduce"), ("_ALLGATHER_BASE", "all_gather"),
                                        ("_REDUCE_SCATTER_BASE", "reduce_scatter"), ("BROADCAST", "broadcast"),
                                        ("ALLTOALL", "all_to_all"), ("allreduce_coalesced", "all_reduce")])
def test_op_names_as_torch_prints_them(printed, op):
    assert normalize_op(printed) == op


def test_unknown_op_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="all_reduce"):
        normalize_op("SCATTERGATHERMAGIC")


def test_sizes_parse_and_range_like_nccl_tests():
    assert parse_size("4K") == 4096 and parse_size("256MiB") == 256 << 20 and parse_size(10) == 10
    assert size_range("4K", "256M", 4)[0] == 4096 and size_range("4K", "256M", 4)[-1] == 256 << 20
    assert len(size_range("4K", "256M", 4)) == 9  # 4K x 4^8 = 256M
    with pytest.raises(ValueError):
        parse_size("four")
    assert human(1 << 20) == "1 MiB" and human(1536) == "1.50 KiB"


def test_expected_time_of_the_600s_eval_allreduce():
    size = op_size_bytes("ALLREDUCE", 467019003, 467019003, 4)
    # 1.87 GB x 2(8-1)/8 at 10 GB/s bus bandwidth: about a third of a second, not ten minutes
    assert expected_seconds("all_reduce", size, 8, 10.0) == pytest.approx(0.327, abs=0.001)
    assert op_size_bytes("_ALLGATHER_BASE", 10, 80, 2) == 160  # all_gather's size is the output
