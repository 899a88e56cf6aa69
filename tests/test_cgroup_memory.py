"""The memory pre-check reads a container's (or a batch job's) limit from cgroups, v2 and
v1, and takes the smaller of what it leaves and the host's available memory (issue 25,
item 5). Each case writes real cgroup-format files under a temporary root and points the
reader at it."""

from __future__ import annotations

import dask.array as da
import psutil

from dkrr import RandomFeatureRidge
from dkrr._system import CgroupMemory, cgroup_memory, local_memory
from dkrr.estimators._solver import choose_solver
from dkrr.linalg._memory import MemoryLimits

GiB = 2**30
MiB = 2**20
V1_UNLIMITED = 9223372036854771712  # what cgroup v1 writes for "no limit"


def _write(directory, **files):
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name.replace("_", ".", 1)).write_text(f"{text}\n")


def _self(tmp_path, *lines):
    """A file in /proc/self/cgroup's format."""
    path = tmp_path / "self_cgroup"
    path.write_text("".join(f"{line}\n" for line in lines))
    return str(path)


def test_v2_limit_less_usage_less_inactive_file_cache(tmp_path):
    root = tmp_path / "cg"
    _write(root, memory_max=4 * GiB, memory_current=GiB,
           memory_stat=f"anon 700000000\nfile 400000000\ninactive_file {256 * MiB}\nactive_file 1000")
    got = cgroup_memory(str(root), _self(tmp_path, "0::/"))
    assert got == CgroupMemory(2, 4 * GiB, GiB - 256 * MiB, str(root))
    assert got.available == 3 * GiB + 256 * MiB


def test_v2_the_tightest_level_of_the_process_cgroup_and_its_ancestors(tmp_path):
    """A SLURM job: the limit sits on the job's cgroup, the process is two levels below,
    the root has no memory.max (a host's root cgroup has none)."""
    root = tmp_path / "cg"
    _write(root, cgroup_controllers="cpu memory")
    _write(root / "slurm" / "job_7", memory_max=8 * GiB, memory_current=6 * GiB)
    _write(root / "slurm" / "job_7" / "step_0", memory_max="max", memory_current=GiB)
    got = cgroup_memory(str(root), _self(tmp_path, "0::/slurm/job_7/step_0"))
    assert got == CgroupMemory(2, 8 * GiB, 6 * GiB, str(root / "slurm" / "job_7"))
    # a tighter step limit wins over its job's when it leaves less
    _write(root / "slurm" / "job_7" / "step_0", memory_max=GiB + 512 * MiB)
    got = cgroup_memory(str(root), _self(tmp_path, "0::/slurm/job_7/step_0"))
    assert got.path == str(root / "slurm" / "job_7" / "step_0") and got.available == 512 * MiB


def test_v2_max_is_no_limit(tmp_path):
    root = tmp_path / "cg"
    _write(root, memory_max="max", memory_current=GiB)
    assert cgroup_memory(str(root), _self(tmp_path, "0::/")) is None


def test_v1_memory_controller_and_a_host_path_that_is_not_mounted(tmp_path):
    """Docker on cgroup v1: /proc/self/cgroup names the host's path (/docker/<id>), and the
    container sees its own cgroup at the mount root."""
    root = tmp_path / "cg"
    _write(root / "memory", memory_limit_in_bytes=2 * GiB, memory_usage_in_bytes=GiB + 100 * MiB,
           memory_stat=f"cache 1000\ninactive_file 5\ntotal_inactive_file {100 * MiB}")
    self_cgroup = _self(tmp_path, "12:pids:/docker/abc", "4:memory:/docker/abc", "1:name=systemd:/docker/abc")
    got = cgroup_memory(str(root), self_cgroup)
    assert got == CgroupMemory(1, 2 * GiB, GiB, str(root / "memory"))
    # the same under the process's own directory, when the host's hierarchy is mounted
    _write(root / "memory" / "docker" / "abc", memory_limit_in_bytes=GiB, memory_usage_in_bytes=256 * MiB)
    got = cgroup_memory(str(root), self_cgroup)
    assert got == CgroupMemory(1, GiB, 256 * MiB, str(root / "memory" / "docker" / "abc"))


def test_v1_unlimited_value_is_no_limit(tmp_path):
    root = tmp_path / "cg"
    _write(root / "memory", memory_limit_in_bytes=V1_UNLIMITED, memory_usage_in_bytes=GiB)
    assert cgroup_memory(str(root), _self(tmp_path, "4:memory:/")) is None


def test_missing_and_unreadable_files(tmp_path):
    root = tmp_path / "cg"
    assert cgroup_memory(str(tmp_path / "nowhere"), str(tmp_path / "no_self")) is None
    root.mkdir()
    assert cgroup_memory(str(root), _self(tmp_path, "0::/")) is None  # no files at all
    _write(root, memory_max="a lot", memory_current=GiB)
    assert cgroup_memory(str(root), _self(tmp_path, "0::/")) is None  # not a number: no limit read
    _write(root, memory_max=2 * GiB)
    (root / "memory.current").unlink()
    # a limit without its usage: all of it is counted as free
    assert cgroup_memory(str(root), str(tmp_path / "no_self")) == CgroupMemory(2, 2 * GiB, 0, str(root))


def test_hybrid_v1_and_v2_the_tighter_one(tmp_path):
    root = tmp_path / "cg"
    _write(root, memory_max=4 * GiB, memory_current=GiB)
    _write(root / "memory", memory_limit_in_bytes=2 * GiB, memory_usage_in_bytes=GiB)
    got = cgroup_memory(str(root), _self(tmp_path, "4:memory:/", "0::/"))
    assert got.version == 1 and got.available == GiB


def test_local_memory_is_the_smaller_of_the_cgroup_and_the_host(tmp_path):
    root = tmp_path / "cg"
    _write(root, memory_max=GiB, memory_current=256 * MiB)
    local, where = local_memory(str(root))
    assert local == 768 * MiB
    assert where == f"the memory left under this process's cgroup v2 limit of 1.00 GiB at {root} with 256 MiB in use"
    _write(root, memory_max=2**50)  # 1 PiB: more than this host has, the host's memory counts
    local, where = local_memory(str(root))
    assert where == "the available memory of this machine"
    assert abs(local - psutil.virtual_memory().available) < 2 * GiB


def test_auto_solver_follows_a_container_limit_and_says_so(tmp_path):
    """The same fit: on the Gram path with this host's memory, on pcg in a 512 MiB
    container (a p = 4096 Gram path needs about 0.4 GiB plus the client's solve)."""
    root = tmp_path / "cg"
    _write(root, memory_max=512 * MiB, memory_current=128 * MiB)
    X, y = da.zeros((1000, 8), chunks=(250, 8)), da.zeros(1000, chunks=250)
    est = RandomFeatureRidge(method="rff", n_components=2048)
    args = (est, X, y, None, 1, 1.0, None, None)
    host = choose_solver(*args, limits=MemoryLimits(None, 64 * GiB))
    assert host.solver == "cholesky"
    container = choose_solver(*args, limits=MemoryLimits(None, *local_memory(str(root))))
    assert container.solver == "pcg"
    assert container.reason.startswith(
        "solver='auto' chose 'pcg': the Gram path (p = 4096 features) needs about ")
    assert (f"in all, more than the memory left under this process's cgroup v2 limit of 512 MiB at {root} with 128 "
            "MiB in use (384 MiB); the matrix-free pcg (p = 4096 features) needs about ") in container.reason
