"""perf/ncu_sass_summary.py: ncu's per-instruction CSV (kernel name row, header, SASS lines) read into
samples, executed instructions and stall reasons, summed by opcode and by ranges of lines."""

from __future__ import annotations

import csv
import io

import pytest

from perf.ncu_sass_summary import main, read_lines, summary

HEADER = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Warp Stall Sampling (Not-issued Samples)",
          "Instructions Executed", "stall_barrier", "stall_long_sb", "stall_wait", "stall_long_sb (Not Issued)"]
ROWS = [
    ["0x00", "      LDC R1, c[0x0][0x28]", "2", "2", "64", "0", "0", "2", "0"],
    ["0x10", "      LDG.E.128 R4, desc[UR4][R2.64]", "1", "1", "64", "0", "0", "1", "0"],
    ["0x20", "      IMAD.U32 R7, R4, 0x10000, RZ", "12", "12", "64", "0", "12", "0", "12"],
    ["0x30", "      FMUL R7, R7, R8", "1", "1", "128", "0", "0", "1", "0"],
    ["0x40", "@P0   EXIT", "4", "4", "32", "4", "0", "0", "0"],
    ["0x50", "      FMUL R9, R7, R7", "0", "0", "1,024", "0", "0", "0", "0"],
]


def table() -> str:
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL)
    writer.writerow(["Kernel Name", "void kernel<int>(Args)"])
    writer.writerow(HEADER)
    writer.writerows(ROWS)
    return out.getvalue()


def test_reads_lines_past_the_kernel_row():
    lines = read_lines(csv.reader(io.StringIO(table())))
    assert [line.samples for line in lines] == [2, 1, 12, 1, 4, 0]
    assert lines[5].executed == 1024  # ncu's thousands separator
    assert [line.opcode for line in lines] == ["LDC", "LDG.E.128", "IMAD.U32", "FMUL", "EXIT", "FMUL"]
    # The not-issued duplicates are not counted twice.
    assert lines[2].stalls == {"stall_barrier": 0, "stall_long_sb": 12, "stall_wait": 0}


def test_summary_by_reason_opcode_and_range():
    text = summary(read_lines(csv.reader(io.StringIO(table()))), splits=[2, 4], top=3)
    assert "1376 warp instructions executed, 20 stall samples" in text
    assert "stall reasons: long_sb 60%, barrier 20%, wait 20%" in text
    assert "executed by opcode: FMUL 1152, LDC 64" in text
    assert "| 0-1 | 3 | 15% | 128 | 9% |" in text
    assert "| 2-3 | 13 | 65% | 192 | 14% |" in text
    assert "| 4-5 | 4 | 20% | 1056 | 77% |" in text
    hottest = text.split("hottest 3 lines")[1].splitlines()[1:]
    assert [int(row.split()[0]) for row in hottest] == [2, 4, 0]
    assert "long_sb 12" in hottest[0] and "IMAD.U32" in hottest[0]


def test_a_file_without_the_table_is_refused(tmp_path, capsys):
    wrong = tmp_path / "details.csv"
    wrong.write_text('"Kernel Name","Metric Name","Metric Value"\n"k","Duration","11.46"\n')
    assert main([str(wrong)]) == 2
    assert "not ncu's source page" in capsys.readouterr().err
    good = tmp_path / "sass.csv"
    good.write_text(table())
    assert main([str(good), "--split", "2", "--top", "1"]) == 0
    assert "| 0-1 |" in capsys.readouterr().out


@pytest.mark.parametrize("split", ["0", "99"])
def test_splits_outside_the_kernel_give_one_range(split):
    text = summary(read_lines(csv.reader(io.StringIO(table()))), splits=[int(split)], top=1)
    assert "| 0-5 | 20 | 100% | 1376 | 100% |" in text
