"""The report's agreement section: tables, the judge-vs-judge kappa heatmap, the key table."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pandas as pd
from test_report import synthetic_report_data

from tasks.report.agreement import agreement_tables, interval_text
from tasks.report.render import render_report


def outcomes(configs: dict[str, float], pairs: int = 40, k: int = 4) -> pd.DataFrame:
    """Per config its noise: the share of calls that answer at random instead of the key."""
    rng = np.random.default_rng(3)
    keys = rng.choice(["A", "B"], size=pairs)
    rows = []
    for config, noise in configs.items():
        for p, key in enumerate(keys):
            for _seed in range(k):
                for order in ("AB", "BA"):
                    outcome = rng.choice(["A", "B", "T", "M"]) if rng.uniform() < noise else key
                    rows.append(
                        {
                            "judge": "sim<j>",
                            "config": config,
                            "dataset": "d",
                            "pair_id": f"p{p:02d}",
                            "order": order,
                            "outcome": outcome,
                            "key": key,
                        }
                    )
    return pd.DataFrame(rows)


def _section(html: str) -> str:
    match = re.search(r'<section id="agreement">(.*?)</section>', html, re.S)
    assert match, "agreement section missing"
    return match.group(1)


def test_section_shows_every_table_and_the_heatmap() -> None:
    tables = agreement_tables(outcomes({"low": 0.1, "high": 0.5, "mid": 0.3}))
    html = render_report(replace(synthetic_report_data(), agreement=tables))
    section = _section(html)
    assert section.count("<svg") == 1  # the heatmap
    assert "sim&lt;j&gt; · high" in section  # escaped
    assert 't-agree"' in section and "t-agree-judges" in section and "t-agree-key" in section
    for row in tables.judges.itertuples():
        assert interval_text(row.kappa, row.kappa_low, row.kappa_high) in section
    alpha = tables.self.set_index(["config", "statistic", "scope"]).sort_index()
    low_noise = alpha.loc[("low", "alpha", "all")]
    assert interval_text(low_noise.value, low_noise.low, low_noise.high) in section
    # the noisier judge agrees less with itself
    assert low_noise.value > alpha.loc[("high", "alpha", "all"), "value"]


def test_one_config_has_no_heatmap_and_no_outcomes_say_so() -> None:
    tables = agreement_tables(outcomes({"low": 0.1}))
    section = _section(render_report(replace(synthetic_report_data(), agreement=tables)))
    assert "<svg" not in section and "t-agree-judges" not in section
    assert 'id="agreement"' not in render_report(synthetic_report_data())  # not computed
    none = agreement_tables(
        outcomes({}).reindex(
            columns=["judge", "config", "dataset", "pair_id", "order", "outcome", "key"]
        )
    )
    empty = _section(render_report(replace(synthetic_report_data(), agreement=none)))
    assert "No outcomes to compare in this run" in empty


def test_a_config_without_values_reads_as_undefined() -> None:
    """Every call of one config failed (`M`): its statistics are undefined, shown `–`, and the
    other config's rows are unaffected."""
    frame = outcomes({"low": 0.1, "dead": 0.0})
    frame.loc[frame["config"] == "dead", "outcome"] = "M"
    tables = agreement_tables(frame)
    dead = tables.self[tables.self["config"] == "dead"]
    assert dead["value"].isna().all() and (dead["pairs"] == 0).all()
    section = _section(render_report(replace(synthetic_report_data(), agreement=tables)))
    assert "<td>–</td>" in section and "sim&lt;j&gt; · dead" in section
    assert tables.confusion.query("config == 'dead' and decision == 'none'")["pairs"].sum() == 40


def test_the_heatmap_has_a_colour_legend() -> None:
    """The kappa heatmap had no legend: nothing said what its shades meant."""
    from tasks.report.agreement import _blend, kappa_heatmap

    tables = agreement_tables(outcomes({"low": 0.1, "high": 0.5, "mid": 0.3}))
    svg = str(kappa_heatmap(tables.judges))
    legend = svg[svg.index("<g><title>Cohen's kappa: the darker") :]
    for text in (">kappa<", ">1<", ">0.5<", ">0 or less<"):
        assert text in legend, text
    fills = re.findall(r'width="12" height="[\d.]+" fill="(#[0-9a-f]{6})"', legend)
    # From the darkest (kappa 1) at the top to white (kappa 0) at the bottom, as the cells.
    assert len(fills) == 20 and fills[0] == _blend(0.975) and fills[-1] == _blend(0.025)
    darkness = [sum(int(f[i : i + 2], 16) for i in (1, 3, 5)) for f in fills]
    assert darkness == sorted(darkness)
