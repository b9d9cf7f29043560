"""examples/trl_quickstart.py trains a few CorrGRPO steps with its defaults (tiny random model, CPU)."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_trl_quickstart_trains_with_corrgrpo(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "trl_quickstart.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    # The last line is the final step's metrics dict; CorrGRPO's diagnostics are among them.
    metrics = ast.literal_eval(result.stdout.strip().splitlines()[-1])
    assert metrics["corrgrpo/groups"] >= 1
    assert "corrgrpo/c_q/mean" in metrics
