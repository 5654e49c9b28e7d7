"""rank_analysis.step_times: which steps time a data-parallel job."""

from __future__ import annotations

from types import SimpleNamespace

import msresnet  # noqa: F401  (CPU speed setting before MindSpore)
import numpy as np
import pytest

from msresnet.ranks.analysis import compare_parameters, step_times


def ranks(epochs: list[int], *seconds: list[float]) -> list[SimpleNamespace]:
    return [SimpleNamespace(step_epochs=np.array(epochs), step_seconds=np.array(s))
            for s in seconds]


def test_later_epochs_only_and_the_slowest_rank():
    records = ranks([1, 1, 2, 2], [9.0, 1.0, 1.0, 2.0], [8.0, 1.5, 3.0, 1.0])
    assert step_times(records).tolist() == [3.0, 2.0]


def test_a_one_epoch_job_drops_only_its_first_step():
    records = ranks([1, 1, 1], [9.0, 1.0, 2.0], [8.0, 1.5, 1.0])
    assert step_times(records).tolist() == [1.5, 2.0]


def test_a_one_step_job_gives_that_step():
    assert step_times(ranks([1], [9.0], [8.0])).tolist() == [9.0]


def test_parameters_compare_by_name_and_no_common_name_is_an_error():
    a = {"conv1.weight": np.ones(3, np.float32), "only_a": np.zeros(1, np.float32)}
    b = {"conv1.weight": np.array([1, 1, 1.5], np.float32)}
    result = compare_parameters(a, b)
    assert result.by_group()["weights"]["max_abs_diff"] == 0.5
    renamed = {"net.conv1.weight": np.ones(3, np.float32)}
    with pytest.raises(ValueError, match="no parameter name in common"):
        compare_parameters(renamed, b)
