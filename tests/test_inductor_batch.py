"""c0 for many problems (kernelpilot.inductor.batch, recorder): the recording orchestration with a fake
recorder (no GPU), the conversion pool (a crash and a hang cost only their own problem), and
``kernelpilot init --from-inductor FOLDER --recordings DIR --out OUT``."""

from __future__ import annotations

import json
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from kernelpilot.inductor import budget, recorder
from kernelpilot.inductor.batch import INDEX, Item, convert_all, discover
pytest.importorskip("triton")
DATA = Path(__file__).parent / "data" / "inductor"

PROBLEM = '''import torch
from torch import nn
{extra}

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(64, 32)]


def get_init_inputs():
    return []
'''

# Inductor's output for torch.relu on a (64, 32) float32 input (torch 2.11's layout, one pointwise kernel)
# Inductor's output as it wrote it; its two long lines are split into string pieces, the text unchanged
RELU_CODE = ('''
from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
import triton
import triton.language as tl
empty_strided_cuda = torch._C._dynamo.guards._empty_strided_cuda


# Topologically Sorted Source Nodes: [relu], Original ATen: [aten.relu]
# Source node to ATen node mapping:
#   relu => relu
triton_poi_fused_relu_0 = async_compile.triton('triton_poi_fused_relu_0', \'\'\'
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.pointwise(
    size_hints={'x': 2048},
    filename=__file__,
    triton_meta={'signature': '''
'''{'in_ptr0': '*fp32', 'out_ptr0': '*fp32', 'xnumel': 'i32', 'XBLOCK': 'constexpr'}, 'device': '''
'''DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, '''
'''regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, warp_size=32), 'constants': '''
'''{}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': '''
'''[{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': '''
'''set(), 'kernel_name': 'triton_poi_fused_relu_0', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': '''
'''False, 'atomic_add_found': False, 'num_load': 1, 'num_store': 1, 'num_reduction': '''
'''0, 'backend_hash': 'B0', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': '''
'''True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': '''
'''True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': '''
'''16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': '''
'''False, 'are_deterministic_algorithms_enabled': False},
    min_elem_per_thread=0
)
@triton.jit
def triton_poi_fused_relu_0(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 2048
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = xindex < xnumel
    x0 = xindex
    tmp0 = tl.load(in_ptr0 + (x0), xmask)
    tmp1 = tl.full([1], 0, tl.int32)
    tmp2 = triton_helpers.maximum(tmp1, tmp0)
    tl.store(out_ptr0 + (x0), tmp2, xmask)
\'\'\', device_str='cuda')


async_compile.wait(globals())
del async_compile

class Runner:
    def __init__(self, partitions):
        self.partitions = partitions

    def call(self, args):
        arg0_1, = args
        args.clear()
        assert_size_stride(arg0_1, (64, 32), (32, 1))
        with torch.cuda._DeviceGuard(0):
            torch.cuda.set_device(0)
            buf0 = empty_strided_cuda((64, 32), (32, 1), torch.float32)
            # Topologically Sorted Source Nodes: [relu], Original ATen: [aten.relu]
            stream0 = get_raw_stream(0)
            triton_poi_fused_relu_0.run(arg0_1, buf0, 2048, stream=stream0)
            del arg0_1
        return (buf0, )
''')


def helpers_2_11() -> str:
    return (DATA / "triton_helpers_2_11.py").read_text()


def relu_recording() -> dict:
    return {"code": RELU_CODE, "configs": {"triton_poi_fused_relu_0": {"kwargs": {"XBLOCK": 256}, "num_warps": 4,
                                                                       "num_stages": 1}},
            "sources": ["x"], "torch": "2.11.0+cu130", "breaks": [], "runtime": {"triton_helpers": helpers_2_11()}}


def write_problems(root: Path, extras: dict[str, str]) -> list[Item]:
    (root / "problems").mkdir(parents=True)
    for name, extra in extras.items():
        (root / "problems" / f"{name}.py").write_text(PROBLEM.format(extra=extra))
    return discover([root / "problems"])


@pytest.mark.slow
def test_convert_all_writes_the_solutions_layout_and_one_failure_stops_nothing(tmp_path: Path) -> None:
    # "crash" kills the conversion process on import; "hang" never finishes; "missing" has no recording;
    # "failed" recorded torch.compile's error: the two good ones are converted all the same
    items = write_problems(tmp_path, {"good_a": "", "good_b": "", "missing": "", "failed": "",
                                      "crash": "import os\nif __name__ != '__main__':\n    os._exit(3)",
                                      "hang": "import time\ntime.sleep(600)"})
    rec = tmp_path / "rec"
    rec.mkdir()
    for name in ("good_a", "good_b", "crash", "hang"):
        (rec / f"{name}.json").write_text(json.dumps(relu_recording()))
    (rec / "failed.json").write_text(json.dumps({"error": "InductorError: LoweringException: boom", "torch": "2.11"}))
    out = tmp_path / "c0"
    t0 = time.monotonic()
    # a hang costs two timeouts (its pool's, then its own alone): 30 s is several times a good conversion's
    # start and work (a spawned process importing torch: 4 s on an idle 2-core machine, more beside xdist's other
    # worker)
    rows = {r["problem"]: r for r in convert_all(items, rec, out, workers=2, timeout=30, report=lambda r: None)}
    assert time.monotonic() - t0 < 240
    assert rows["good_a"]["outcome"] == rows["good_b"]["outcome"] == "converted"
    assert rows["good_a"]["candidate"] == str(out / "good_a") and (out / "good_a" / "model_new.py").is_file()
    assert (out / "good_a" / "triton_helpers.py").is_file()
    assert rows["missing"]["outcome"] == "not_recorded"
    assert rows["failed"]["outcome"] == "failed" and "LoweringException: boom" in rows["failed"]["reason"]
    assert rows["crash"]["outcome"] == "failed" and "died" in rows["crash"]["reason"]
    assert rows["hang"]["outcome"] == "failed" and "did not finish within 30 s" in rows["hang"]["reason"]
    index = json.loads((out / INDEX).read_text())
    assert [r["problem"] for r in index] == [i.key for i in items]


def test_init_from_inductor_folder_with_recordings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kernelpilot.cli import main

    write_problems(tmp_path, {"relu_one": "", "relu_two": "", "no_recording": ""})
    rec = tmp_path / "rec"
    rec.mkdir()
    (rec / "relu_one.json").write_text(json.dumps(relu_recording()))
    bad = relu_recording()
    bad["code"] = bad["code"].replace("def call(self, args)", "def other(self, args)")
    (rec / "relu_two.json").write_text(json.dumps(bad))
    rc = main(["init", "--from-inductor", str(tmp_path / "problems"), "--recordings", str(rec), "--out",
               str(tmp_path / "out"), "--jobs", "2"])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "3 problems: converted 1, failed 1, not_recorded 1" in printed
    index = {r["problem"]: r for r in json.loads((tmp_path / "out" / INDEX).read_text())}
    assert index["relu_one"]["outcome"] == "converted" and index["relu_one"]["libraries"] == []
    assert "no call() function" in index["relu_two"]["reason"]
    assert index["no_recording"]["outcome"] == "not_recorded"
    model = (tmp_path / "out" / "relu_one" / "model_new.py").read_text()
    assert "triton_poi_fused_relu_0[(triton.cdiv(2048, 256),)](arg0_1, buf0, 2048, XBLOCK=256" in model
    assert "def maximum(" in (tmp_path / "out" / "relu_one" / "triton_helpers.py").read_text()


FORK_PRELOAD = ("kernelpilot.inductor.generate",)  # what the fake recorder needs: the fork server starts in no time
FAKE_GENERATE = textwrap.dedent('''
    import json, os, sys, time
    from kernelpilot.inductor.generate import MARKER
    problem = sys.argv[1]
    name = os.path.basename(problem)[:-3]
    with open(os.environ["FAKE_LOG"], "a") as log:
        log.write(f"start {name} {time.monotonic()}\\n")
    if name == "slow":
        import subprocess
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])  # a grandchild holding the pipes
        time.sleep(120)
    time.sleep(0.5)
    if name == "oom" and not os.path.exists(os.environ["FAKE_LOG"] + ".oom"):
        open(os.environ["FAKE_LOG"] + ".oom", "w").close()
        print(MARKER + json.dumps({"error": "OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB"}))
        sys.exit(0)
    with open(os.environ["FAKE_LOG"], "a") as log:
        log.write(f"end {name} {time.monotonic()}\\n")
    print(MARKER + json.dumps({"graphs": [], "torch": "fake", "compile_s": 0.1, "peak_bytes": 1}))
''')


def test_record_all_writes_as_it_goes_times_out_retries_oom_and_resumes(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    items = write_problems(tmp_path, {"a": "", "b": "", "slow": "", "oom": ""})
    script = tmp_path / "fake_generate.py"
    script.write_text(FAKE_GENERATE)
    log = tmp_path / "log.txt"
    monkeypatch.setenv("FAKE_LOG", str(log))
    out = tmp_path / "rec"
    t0 = time.monotonic()
    rows = recorder.record_all(items, out, jobs=3, timeout=8, command=[sys.executable, str(script)],
                               sizes={i.key: 1 << 20 for i in items}, report=lambda r: None, preload=FORK_PRELOAD)
    assert time.monotonic() - t0 < 60  # the slow one (and its grandchild) killed at 8 s
    status = {r["problem"]: r for r in rows}
    assert status["a"]["status"] == status["b"]["status"] == "eager"
    assert status["slow"]["status"] == "failed" and "timed out after 8 s" in status["slow"]["error"]
    assert status["oom"]["status"] == "eager"  # ran out of memory once, recorded again alone
    assert json.loads((out / "oom.json").read_text())["torch"] == "fake"
    index = {r["problem"]: r for r in json.loads((out / "index.json").read_text())}
    assert set(index) == {"a", "b", "slow", "oom"}
    # run again: only what failed is recorded again
    log.write_text("")
    recorder.record_all(items, out, jobs=3, timeout=2, command=[sys.executable, str(script)],
                        sizes={i.key: 1 << 20 for i in items}, report=lambda r: None, preload=FORK_PRELOAD)
    assert [line.split()[1] for line in log.read_text().splitlines() if line.startswith("start")] == ["slow"]


def test_the_scheduler_keeps_the_memory_budget() -> None:
    items = [Item(f"p{i}", Path(f"p{i}.py")) for i in range(6)]
    need = {"p0": 60, "p1": 60, "p2": 30, "p3": 30, "p4": 30, "p5": 10}
    scheduler = budget.Scheduler(items, need, total=100, deadline=None)
    running: list[int] = []
    peak = [0]
    lock = threading.Lock()

    def work() -> None:
        while (item := scheduler.take()) is not None:
            with lock:
                running.append(need[item.key])
                peak[0] = max(peak[0], sum(running))
            time.sleep(0.05)
            with lock:
                running.remove(need[item.key])
            scheduler.give(item)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak[0] <= 100 and not scheduler.todo and scheduler.used == 0
    # one problem larger than the whole budget still runs, alone
    big = budget.Scheduler([Item("huge", Path("h.py"))], {"huge": 500}, total=100, deadline=None)
    assert big.take() is not None


def test_estimates_size_problems_on_the_meta_device(tmp_path: Path) -> None:
    items = write_problems(tmp_path, {"small": "", "broken": "raise RuntimeError('no')"})
    sizes = budget.estimate_all(items, jobs=2)
    assert sizes["small"].bytes == 2 * 64 * 32 * 4  # the input and the output
    assert sizes["broken"].bytes == budget.UNKNOWN_SIZE
