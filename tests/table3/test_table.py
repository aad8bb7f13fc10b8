"""Our numbers beside the paper's: changes paired by seed, spreads, the agreement line, the
written table and the figure."""

import json
import math

import pytest

from aiayn.table3.rows import ROWS, settings
from aiayn.table3.table import agreement, build_table, markdown, write_table

HEADER = {"scale": "cpu", "rule": "widths / 8", "corpus": "gettext", "budget": "600 updates",
          "seeds": [0, 1], "dev_pairs": 853, "beam": 4, "alpha": 0.6, "paper_vocab": 37000,
          "base_settings": {"N": 6}}


def _record(row, seed, bleu, ppl):
    s = settings(ROWS[row], "cpu", 600)
    return {"row": row, "seed": seed, "bleu": bleu, "ppl": ppl, "settings": s, "steps": 600,
            "params": 1_000_000, "params_paper_size": 63_000_000, "seconds": 10.0}


def test_changes_are_paired_by_seed_with_mean_and_sample_spread():
    results = [_record("base", 0, 20.0, 5.0), _record("base", 1, 22.0, 4.0),
               _record("C-N2", 0, 17.0, 6.0), _record("C-N2", 1, 21.0, 5.0),
               _record("D-ls0.0", 0, 19.0, 4.5)]  # one seed: against base seed 0
    table = build_table(results, HEADER)
    rows = {r["row"]: r for r in table["rows"]}
    assert list(rows) == ["base", "C-N2", "D-ls0.0"]  # the paper's order
    n2 = rows["C-N2"]
    assert n2["bleu"]["mean"] == 19.0 and n2["bleu"]["sd"] == pytest.approx(math.sqrt(8))
    assert n2["delta_bleu"]["values"] == [-3.0, -1.0]  # 17 - 20, 21 - 22: paired by seed
    assert n2["delta_bleu"]["sd"] == pytest.approx(math.sqrt(2))
    assert n2["delta_ppl"]["mean"] == 1.0
    assert n2["paper"]["delta_bleu"] == pytest.approx(23.7 - 25.8)
    assert n2["paper"]["delta_ppl"] == pytest.approx(6.11 - 4.92)
    assert rows["D-ls0.0"]["delta_bleu"]["values"] == [-1.0] and rows["D-ls0.0"]["bleu"]["sd"] == 0
    assert "delta_bleu" not in rows["base"] and rows["base"]["paper"]["delta_bleu"] is None


def test_a_seed_without_its_base_reads_against_the_bases_mean():
    table = build_table([_record("base", 0, 20.0, 5.0), _record("base", 1, 22.0, 5.0),
                         _record("A-h1", 2, 18.0, 6.0)], HEADER)
    assert table["rows"][1]["delta_bleu"]["values"] == [-3.0]


def test_without_base_there_is_no_change_and_no_agreement():
    table = build_table([_record("C-N2", 0, 17.0, 6.0)], HEADER)
    assert "delta_bleu" not in table["rows"][0]
    assert table["agreement"]["bleu"] == {"rows": 0, "spearman": None, "sign_differs": []}
    assert "no row beside a base" in table["summary"]


def test_agreement_ranks_the_changes_and_names_the_rows_whose_sign_differs():
    def row(name, ours, paper_bleu):
        return {"row": name, "delta_bleu": {"mean": ours}, "delta_ppl": {"mean": -ours},
                "paper": {"delta_bleu": paper_bleu, "delta_ppl": -paper_bleu}}

    same = [row("a", -2.0, -0.9), row("b", 0.5, 0.4), row("c", 1.0, 0.2), row("d", -1.0, -0.3)]
    a = agreement(same)["bleu"]
    assert a["rows"] == 4 and a["spearman"] == pytest.approx(0.8) and a["sign_differs"] == []
    reversed_ = [row("a", 1.0, -0.9), row("b", 0.0, 0.4), row("c", -1.0, 0.2), row("z", 3.0, 0.0)]
    a = agreement(reversed_)["bleu"]
    # "z": the paper's change is 0, no sign to differ from; "b": ours 0 differs from +0.4
    assert a["sign_differs"] == ["a", "b", "c"] and a["spearman"] < 0


def test_the_written_table_has_every_row_the_papers_numbers_and_ours(tmp_path):
    results = [_record(name, 0, 20.0 - i / 10, 5.0 + i / 10) for i, name in enumerate(ROWS)]
    table = build_table(results, HEADER)
    text = markdown(table)
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    assert len(lines) == 1 + len(ROWS)
    assert lines[0].startswith("| row | N | d_model | d_ff | h | d_k | d_v | P_drop | eps_ls |")
    b16 = next(line for line in lines if line.startswith("| B-dk16 "))
    cells = [c.strip() for c in b16.strip("|").split("|")]
    assert cells[5] == "4" and cells[6] == ""  # d_k 16 / 4; d_v blank: as base's
    assert "5.16" in cells and "25.1" in cells and "58" in cells and "-0.7" in cells
    assert "widths / 8" in text and table["summary"] in text
    # one seed: the header says what it cannot show; with more, mean ± sd show it
    assert "one seed" not in text  # HEADER: seeds 0 and 1
    assert "one seed: its changes carry seed noise" in markdown(
        build_table(results, {**HEADER, "seeds": [0]}))
    paths = write_table(table, tmp_path)
    assert [p.name for p in paths] == ["table3.md", "table3.json"]
    assert json.loads(paths[1].read_text())["summary"] == table["summary"]


def test_the_figure_has_a_point_per_row_beside_the_papers(tmp_path):
    from aiayn.viz.style import save_figure
    from aiayn.viz.table3 import table3_figure

    results = [_record(name, seed, 20.0 - i / 10 + seed, 5.0) for i, name in enumerate(ROWS)
               for seed in (0, 1)]
    fig = table3_figure(build_table(results, HEADER))
    left, right = fig.axes
    assert [t.get_text() for t in left.get_yticklabels()] == list(ROWS)[1:]  # top down
    assert len(right.texts) == len(ROWS) - 1  # every row but base, labelled
    assert "Spearman" in right.get_title()
    path = save_figure(fig, tmp_path / "table3", formats=("png",))[0]
    assert path.stat().st_size > 10_000
