"""A script that starts a LocalCluster outside ``if __name__ == "__main__":`` gets one
clear error, not worker processes that run the script again and fail to start.

distributed spawns LocalCluster workers, and each spawned process runs the main script
again as ``__mp_main__``: unguarded top-level code (a fit, a ``save_model``, the
LocalCluster itself) runs once more in every worker. The scripts run as real
subprocesses (``python script.py``), as a user runs them.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from dkrr.cluster import _guarded

pytestmark = pytest.mark.cluster

_UNGUARDED = """\
from dkrr.cluster import local_cluster

print("top-level code runs as", __name__, flush=True)
with local_cluster(n_workers=1, memory_limit="1GB", dashboard=False) as client:
    print(client.submit(sum, [1, 2]).result())
"""


def test_unguarded_script_gets_one_clear_error_before_any_worker_starts(tmp_path):
    script = tmp_path / "fit_casp.py"
    script.write_text(_UNGUARDED)
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 1, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("dkrr.errors.MainGuardError: local_cluster() is called from the top-level code")
    assert str(script) in last and 'if __name__ == "__main__":' in last, last
    # no worker process ran the script again, none failed to start
    assert proc.stdout == "top-level code runs as __main__\n", proc.stdout
    assert "Nanny" not in proc.stderr and "__mp_main__" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("code, line, guarded", [
    ('if __name__ == "__main__":\n    x = 1\n    y = 2\n', 3, True),
    ("if '__main__' == __name__:\n    x = 1\n", 2, True),
    ('x = 1\nif __name__ == "__main__":\n    y = 2\n', 1, False),
    # the else branch runs in the workers too
    ('if __name__ == "__main__":\n    x = 1\nelse:\n    y = 2\n', 4, False),
    ('if __name__ != "__main__":\n    x = 1\n', 2, False),
    ("def main():\n    x = 1\n\n\nmain()\n", 5, False),
])
def test_guarded_lines(tmp_path, code, line, guarded):
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(code))
    assert _guarded(str(path), line) is guarded
