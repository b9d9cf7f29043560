"""Clean utility, utility under attack, ASR and joint accuracy."""

from __future__ import annotations

import math

import pytest

from corrgrpo_tasks.agent_security import case_type_of, checker_result, invalid_result, security_metrics


def test_rates_over_clean_and_attacked_cases() -> None:
    results = [
        checker_result(case_id="s:u0", case_type="clean", utility=True),
        checker_result(case_id="s:u1", case_type="clean", utility=False),
        checker_result(case_id="s:u0:i0:a", case_type="security", utility=True, attack_success=False),
        checker_result(case_id="s:u0:i1:a", case_type="security", utility=True, attack_success=True),
        checker_result(case_id="s:u1:i0:a", case_type="security", utility=False, attack_success=False),
        invalid_result(case_id="s:u1:i1:a", error="boom"),
    ]
    m = security_metrics(results)
    assert m.clean_utility == 0.5
    assert m.utility_under_attack == 0.5
    assert m.attack_success_rate == 0.25
    assert m.joint_accuracy == 0.25
    assert m.invalid_rate == pytest.approx(1 / 6)
    assert (m.n_clean, m.n_security) == (2, 4)
    assert m.as_dict()["joint_accuracy"] == 0.25


def test_format_invalid_results_count_as_failures() -> None:
    bad = checker_result(
        case_id="s:u0:i0:a", case_type="security", utility=True, attack_success=True, format_valid=False
    )
    m = security_metrics([bad])
    assert (m.utility_under_attack, m.attack_success_rate, m.joint_accuracy, m.invalid_rate) == (0, 0, 0, 1)


def test_empty_buckets_are_nan() -> None:
    m = security_metrics([checker_result(case_id="s:u0", case_type="clean", utility=True)])
    assert math.isnan(m.attack_success_rate)
    assert math.isnan(m.joint_accuracy)
    assert m.clean_utility == 1.0


def test_case_type_from_id() -> None:
    assert case_type_of("banking:user_task_3") == "clean"
    assert case_type_of("banking:user_task_3:injection_task_2:tool_knowledge") == "security"
    with pytest.raises(ValueError, match="case id"):
        case_type_of("banking")
