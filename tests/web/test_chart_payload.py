"""app/web/widgets/chart_payload.py: the Monitor's charts as one payload per poll, whole figures the first time and the
points each series gained after, on top of what the page said it applied."""

from __future__ import annotations

import json
import math

from app.web.widgets.chart_payload import KEEP, Drawn, payload, plain, summary
from app.web.widgets.charts import CHARTS, build_figure

REWARD = CHARTS[0]


def _reward(steps: int) -> object:
    """The reward chart of one run with ``steps`` steps of the total reward and one reward function."""
    series = {
        "reward": [(s, s / 10, 100.0 + s) for s in range(1, steps + 1)],
        "rewards/correctness/mean": [(s, s / 20, 100.0 + s) for s in range(1, steps + 1)],
    }
    return build_figure(REWARD, {"1: run": series})


def test_the_first_poll_sends_each_figure_whole_with_the_theme_once():
    drawn = Drawn()
    sent = payload({"chart-reward": _reward(3), "chart-kl": None}, drawn, None)
    assert sent["base"] is None and sent["template"]["layout"]  # Plotly's default look, for every chart
    figure = sent["charts"]["chart-reward"]["figure"]
    assert [trace["y"] for trace in figure["data"]] == [[0.1, 0.2, 0.3], [0.05, 0.1, 0.15]]
    assert "template" not in figure["layout"]
    assert sent["charts"]["chart-kl"] == {"hidden": True}
    json.dumps(sent, allow_nan=False)  # JSON as a browser reads it: no NaN, no numpy


def test_a_later_poll_sends_only_the_points_each_series_gained():
    drawn = Drawn()
    first = payload({"chart-reward": _reward(3)}, drawn, None)
    later = payload({"chart-reward": _reward(5)}, drawn, first["token"])
    assert later["base"] == first["token"] and "template" not in later
    change = later["charts"]["chart-reward"]
    assert change["extend"] == [[0, [4, 5], [0.4, 0.5]], [1, [4, 5], [0.2, 0.25]]]
    assert "figure" not in change and "layout" not in change  # the layout did not change
    assert "total reward 0.5 at step 5" in change["label"]


def test_nothing_new_sends_nothing():
    drawn = Drawn()
    first = payload({"chart-reward": _reward(3)}, drawn, None)
    assert payload({"chart-reward": _reward(3), "chart-kl": KEEP}, drawn, first["token"]) is None


def test_a_page_that_missed_a_payload_gets_every_chart_whole_again():
    drawn = Drawn()
    first = payload({"chart-reward": _reward(3), "chart-kl": None}, drawn, None)
    payload({"chart-reward": _reward(4)}, drawn, first["token"])  # never applied by the page
    again = payload({"chart-reward": KEEP}, drawn, first["token"])
    assert again["base"] is None and again["template"]
    assert len(again["charts"]["chart-reward"]["figure"]["data"][0]["y"]) == 4
    assert again["charts"]["chart-kl"] == {"hidden": True}


def test_a_figure_that_is_not_the_old_one_grown_is_sent_whole():
    drawn = Drawn()
    first = payload({"chart-reward": _reward(3)}, drawn, None)
    other = build_figure(REWARD, {"2: other": {"reward": [(1, 0.9, 1.0)]}})
    later = payload({"chart-reward": other}, drawn, first["token"])
    assert later["base"] == first["token"] and later["charts"]["chart-reward"]["figure"]["data"][0]["y"] == [0.9]


def test_non_finite_values_become_gaps():
    series = {"reward": [(1, 0.5, 1.0), (2, math.nan, 2.0), (3, math.inf, 3.0)]}
    figure = plain(build_figure(REWARD, {"1: run": series}).data[0].to_plotly_json())
    assert figure["y"] == [0.5, None, None] and figure["x"] == [1, 2, 3]


def test_a_chart_says_in_words_what_it_draws_or_why_it_draws_nothing():
    drawn = Drawn()
    sent = payload({"chart-reward": _reward(2), "chart-kl": build_figure(CHARTS[3], {"1: run": {}})}, drawn, None)
    said = sent["charts"]["chart-reward"]["label"]
    assert said == "Reward (total and per function): total reward 0.2 at step 2; correctness 0.1 at step 2"
    assert summary(sent["charts"]["chart-kl"]["figure"]) == "KL to the base model: nothing logged for this chart yet"
