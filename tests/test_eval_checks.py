"""The engine's checks as functions, on CPU tensors: comparison, poison detection, discrimination,
operator classification, kernel-trace rules, timing statistics, speed of light, ceilings cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from kernelpilot.evaluation.audit import kernels as audit_kernels  # noqa: E402
from kernelpilot.evaluation.audit import runtime as ra  # noqa: E402
from kernelpilot.evaluation.timing import speed_of_light as sol  # noqa: E402
from kernelpilot.evaluation.timing import interleaved as tm  # noqa: E402
from kernelpilot.evaluation.correctness import verify as vf  # noqa: E402
from kernelpilot.evaluation.timing.ceilings import Ceilings, load_cached, save  # noqa: E402
from kernelpilot.verdict import Timing  # noqa: E402

FP32 = vf.Tolerance(1e-4, 1e-4, 1e-5)
BF16 = vf.Tolerance(1e-2, 1e-2, 1e-2)


def _ref(n: int = 4096, dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    t64 = torch.randn(n, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    return t64.to(dtype), t64


def test_compare_accepts_rounding_and_refuses_wrong_values() -> None:
    ref, ref64 = _ref()
    assert vf.compare(ref.clone(), ref, ref64, FP32)["passed"]
    wrong = ref.clone()
    wrong[17] += 1.0
    res = vf.compare(wrong, ref, ref64, FP32)
    assert not res["passed"] and res["mismatched"] == 1


def test_compare_holds_a_reordered_sum_to_the_references_own_precision() -> None:
    # rows of large signed terms (inputs scaled by 1e3) summed to results that often cancel near zero
    g = torch.Generator().manual_seed(1)
    terms = torch.randn(256, 4096, dtype=torch.float64, generator=g) * 1e3
    terms[::4, -1] -= terms[::4].sum(1) + torch.randn(64, dtype=torch.float64, generator=g)  # sums of about 1
    terms = terms.float().double()  # exactly representable inputs, as the problem's would be
    truth = terms.sum(1)
    ref = terms.float().sum(1)  # the problem's fp32 order
    reordered = terms.float().view(256, 64, 64).sum(1).sum(1)  # another fp32 order, blocked
    o, r = reordered.double(), ref.double()
    plain = ((o - r).abs() <= 1e-4 + 1e-4 * r.abs()) | ((o - truth).abs() <= 1e-4 + 1e-4 * truth.abs())
    assert not bool(plain.all())  # atol/rtol alone would call this candidate wrong
    res = vf.compare(reordered, ref, truth, FP32)
    assert res["passed"], res["message"]
    wrong = reordered.clone()
    wrong[4] += 50 * float((ref.double() - truth).abs().max())  # a cancelled row, far beyond the reference error
    res = vf.compare(wrong, ref, truth, FP32)
    assert not res["passed"] and res["mismatched"] == 1 and "twice the dtype reference" in res["message"]


def test_compare_refuses_precision_downgrade() -> None:
    ref, ref64 = _ref()
    downgraded = ref.to(torch.bfloat16).to(torch.float32)  # bf16 arithmetic on an fp32 problem
    res = vf.compare(downgraded, ref, ref64, FP32)
    assert not res["passed"]
    assert res["normalized_error"] > 1e-4


def test_compare_finds_unwritten_poison_and_type_shape_dtype() -> None:
    ref, ref64 = _ref()
    partial = ref.clone()
    partial[2048:] = float("nan")
    res = vf.compare(partial, ref, ref64, FP32)
    assert not res["passed"] and res["unwritten"] == 2048 and "never written" in res["message"]

    class Sub(torch.Tensor):
        pass

    assert "not a plain torch.Tensor" in vf.compare(ref.as_subclass(Sub), ref, ref64, FP32)["message"]
    assert "shape" in vf.compare(ref[:-1], ref, ref64, FP32)["message"]
    assert "dtype" in vf.compare(ref.double(), ref, ref64, FP32)["message"]


def test_compare_matches_overflow_like_the_reference() -> None:
    ref64 = torch.tensor([1.0, 1e6, -1e6], dtype=torch.float64)
    ref = ref64.to(torch.float16)  # 1e6 overflows to +-inf in fp16
    assert vf.compare(ref.clone(), ref, ref64, vf.Tolerance(1e-2, 1e-2, 2e-3))["passed"]


def test_reference_error_raises_the_normalised_threshold() -> None:
    ref64 = torch.randn(4096, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    ref = (ref64 * (1 + 3e-3)).to(torch.bfloat16)  # a reference that is itself off by 3e-3
    res = vf.compare(ref.clone(), ref, ref64, BF16)
    assert res["passed"] and res["reference_normalized_error"] > 2e-3


def test_zero_and_constant_outputs_fail_or_the_problem_cannot_discriminate() -> None:
    ref, ref64 = _ref()
    zeros, consts = vf.trivial_outputs(ref)
    assert not vf.compare_all(zeros, ref, ref64, FP32)["passed"]
    assert not vf.compare_all(consts, ref, ref64, FP32)["passed"]
    flat64 = torch.full((4096,), 1 / 4096, dtype=torch.float64)  # mean(softmax(x)): always 1/N
    flat = flat64.float()
    zeros, consts = vf.trivial_outputs(flat)
    assert vf.compare_all(consts, flat, flat64, FP32)["passed"]  # a constant passes: cannot discriminate


def test_a_scalar_output_is_tested_against_the_previous_trials_value() -> None:
    # a mean loss: the mean of a one-element reference is the reference, so that says nothing
    loss64 = torch.tensor(11.93, dtype=torch.float64)
    zeros, consts = vf.trivial_outputs(loss64.float())
    assert consts is None and not vf.compare_all(zeros, loss64.float(), loss64, FP32)["passed"]
    # on later trials the constant is what a hard-coded result would return: the previous trial's value
    other64 = torch.tensor(13.4, dtype=torch.float64)
    _, consts = vf.trivial_outputs(other64.float(), [loss64.float()])
    assert consts is not None and float(consts[0]) == pytest.approx(11.93)
    assert not vf.compare_all(consts, other64.float(), other64, FP32)["passed"]


def test_draw_inputs_keeps_domains_and_integers(tmp_path: Path) -> None:
    problem = tmp_path / "p.py"
    problem.write_text(
        "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x, idx, y):\n        return x\n"
        "def get_inputs():\n    return [torch.rand(64, 64), torch.randint(0, 10, (64,)), torch.randn(64, 64)]\n"
        "def get_init_inputs():\n    return []\n", encoding="utf-8")
    from kernelpilot.problem import load_problem

    module = load_problem(problem).load_module()
    seen = []
    for dist in ("normal", "uniform", "scaled"):
        x, idx, y = vf.draw_inputs(module, 7, dist, "cpu")
        assert bool((x >= 0).all()), dist  # get_inputs drew x non-negative: keep its domain
        assert bool((y < 0).any()), dist
        assert idx.dtype == torch.int64 and int(idx.max()) < 10
        seen.append(x)
    assert not torch.equal(seen[0], seen[1])
    again = vf.draw_inputs(module, 7, "normal", "cpu")
    assert torch.equal(again[0], seen[0]) and torch.equal(again[1], vf.draw_inputs(module, 7, "scaled", "cpu")[1])
    assert vf.inputs_equal(again, vf.clone_inputs(again))
    mutated = vf.clone_inputs(again)
    mutated[2][0, 0] += 1
    assert not vf.inputs_equal(again, mutated)


def test_torch_ops_in_forward_are_classified() -> None:
    x = torch.randn(128, 128)

    def honest_glue(a: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(a)
        out.copy_(a.t().contiguous().view(-1).reshape(128, 128))
        return out

    ops, _ = ra.record_ops(honest_glue, [x])
    assert ra.op_findings(ops, [], 4096) == []

    ops, _ = ra.record_ops(lambda a: torch.softmax(a, dim=1) * 2, [x])
    found = {f.evidence: f.severity for f in ra.op_findings(ops, [], 4096)}
    assert found == {"aten._softmax": "reject", "aten.mul": "reject"}
    assert {f.evidence for f in ra.op_findings(ops, ["softmax", "mul"], 4096)} == set()

    ops, _ = ra.record_ops(lambda a: a @ a, [x])
    assert ra.op_findings(ops, ["cublas"], 4096) == []
    assert [f.evidence for f in ra.op_findings(ops, [], 4096)] == ["aten.mm"]

    ops, _ = ra.record_ops(lambda a: a.sum() * 0.5, [torch.randn(16)])  # a scalar: warn only
    assert {f.severity for f in ra.op_findings(ops, [], 4096)} == {"warn"}


def test_kernel_trace_rules() -> None:
    own = ["void scale_kernel<float>(float const*, float*, int)"]
    honest = ra.KernelTrace(kernels=[("void scale_kernel<float>(float const*, float*, int)", 7)], home_stream=7)
    assert ra.kernel_findings(honest, own, []) == []
    assert ra.kernel_findings(honest, [], []) == []  # heuristic: not a torch/library kernel
    unused = ra.KernelTrace(kernels=[("void at::native::vectorized_elementwise_kernel<4, ...>", 7)], home_stream=7)
    assert [f.rule for f in ra.kernel_findings(unused, own, [])] == ["no-custom-kernel"]
    side = ra.KernelTrace(kernels=[("void scale_kernel<float>(float const*, float*, int)", 13)], home_stream=7)
    assert [f.rule for f in ra.kernel_findings(side, own, [])] == ["side-stream"]
    cublas = ra.KernelTrace(kernels=[("void scale_kernel<float>(float const*, float*, int)", 7),
                                     ("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT", 7)], home_stream=7)
    assert [f.rule for f in ra.kernel_findings(cublas, own, [])] == ["library-kernel"]
    assert ra.kernel_findings(cublas, own, ["cublas"]) == []
    # a candidate that compiled no kernel of its own and calls an allowed library (a cuBLASLt epilogue)
    lt_only = ra.KernelTrace(kernels=[("nvjet_tst_256x128_64x4_2x1_v_bz_coopA_bias_gelu_TNN", 7)], home_stream=7)
    assert [(f.rule, f.severity) for f in ra.kernel_findings(lt_only, [], ["cublas", "cublaslt"])] == [
        ("library-only", "warn")]
    assert [f.rule for f in ra.kernel_findings(lt_only, [], [])] == ["no-custom-kernel", "library-kernel"]
    # built kernels that never ran are still a rejection, library allowed or not
    assert [f.rule for f in ra.kernel_findings(lt_only, own, ["cublas"])] == ["no-custom-kernel"]
    blind = ra.kernel_findings(ra.KernelTrace(), own, [])  # the profiler saw nothing: say so, do not reject
    assert [(f.rule, f.severity) for f in blind] == [("profiler-unavailable", "warn")]


def test_kernel_names_in_an_anonymous_namespace_are_named_not_lost() -> None:
    """KernelBench level1/46's c0 calls aten.avg_pool3d, whose kernel sits in an anonymous namespace: the
    finding must name it (it read "seen: no GPU work at all"), and an own kernel there must still count."""
    pool = ("void at::native::(anonymous namespace)::avg_pool3d_cuda_update_output<3, float, float>("
            "torch::headeronly::detail::GenericPackedTensorAccessor<float const, 4ul>, int, int, bool)")
    assert audit_kernels._base_name(pool) == "avg_pool3d_cuda_update_output"
    found = ra.kernel_findings(ra.KernelTrace(kernels=[(pool, 7)], home_stream=7), ["my_kernel"], [])
    assert [f.rule for f in found] == ["no-custom-kernel"]
    assert "avg_pool3d_cuda_update_output" in found[0].message and "no GPU work" not in found[0].message
    mine = "void (anonymous namespace)::my_kernel<float>(float const*, float*, int)"
    assert ra.kernel_findings(ra.KernelTrace(kernels=[(mine, 7)], home_stream=7), ["my_kernel"], []) == []


def test_own_kernels_by_whole_name_from_the_sources(tmp_path) -> None:
    """An own kernel whose name looks like a library's (the H200 corpus: ``gelu_cudnn_kernel`` was taken for
    cuDNN and the candidate rejected [no-custom-kernel]) counts once the sources declare it; an own kernel
    named ``kernel`` never makes torch's ``elementwise_kernel`` the candidate's."""
    from kernelpilot.evaluation.candidate import cuda_kernel_names, load_candidate

    mine = ra.KernelTrace(kernels=[("gelu_cudnn_kernel(float const*, float*, long long)", 7)], home_stream=7)
    assert [f.rule for f in ra.kernel_findings(mine, [], [])] == ["no-custom-kernel", "library-kernel"]
    assert ra.kernel_findings(mine, ["gelu_cudnn_kernel"], []) == []
    torch_only = ra.KernelTrace(kernels=[("void at::native::vectorized_elementwise_kernel<4, F>(int, F)", 7)],
                                home_stream=7)
    assert [f.rule for f in ra.kernel_findings(torch_only, ["kernel"], [])] == ["no-custom-kernel"]
    mangled = ra.KernelTrace(kernels=[("_Z17gelu_cudnn_kernelPKfPfx", 7)], home_stream=7)
    assert ra.kernel_findings(mangled, ["gelu_cudnn_kernel"], []) == []
    nested = ra.KernelTrace(kernels=[("void ns::gelu_cudnn_kernel<float>(float const*)", 7)], home_stream=7)
    assert ra.kernel_findings(nested, ["gelu_cudnn_kernel"], []) == []
    (tmp_path / "c.py").write_text(
        'import torch\nSRC = r"""\n__global__ void gelu_cudnn_kernel(const float* x) {}\n'
        'template <int N> __global__ void __launch_bounds__(256) tiled(float* y) {}\n'
        '__global__ void\nsplit_line_kernel (int n) {}\n"""\nclass ModelNew(torch.nn.Module):\n    def forward(self, '
        'x):\n        return x\n')
    assert cuda_kernel_names(load_candidate(tmp_path / "c.py")) == ["gelu_cudnn_kernel", "tiled", "split_line_kernel"]


def test_an_own_kernel_named_like_torchs_does_not_claim_torchs(tmp_path) -> None:
    """An own kernel deliberately named ``vectorized_elementwise_kernel``: torch's kernel of that bare name (in
    ``at::native``) is still torch's, so a candidate whose own kernel never ran is ``no-custom-kernel``; a
    kernel the candidate itself declares in ``at::native`` is its own."""
    from kernelpilot.evaluation.candidate import cuda_kernel_names, load_candidate

    torchs = ("void at::native::vectorized_elementwise_kernel<4, at::native::AbsFunctor<float>, std::array<char*, 2> "
              ">(int, at::native::AbsFunctor<float>, std::array<char*, 2>)")
    mine = "vectorized_elementwise_kernel(float const*, float*, int)"
    only_torch = ra.KernelTrace(kernels=[(torchs, 7)], home_stream=7)
    assert [f.rule
            for f in ra.kernel_findings(only_torch, ["vectorized_elementwise_kernel"], [])] == ["no-custom-kernel"]
    both = ra.KernelTrace(kernels=[(torchs, 7), (mine, 7)], home_stream=7)
    assert ra.kernel_findings(both, ["vectorized_elementwise_kernel"], []) == []
    anonymous = "void (anonymous namespace)::vectorized_elementwise_kernel<4>(float const*)"
    assert ra.kernel_findings(ra.KernelTrace(kernels=[(anonymous, 7)], home_stream=7),
                              ["vectorized_elementwise_kernel"], []) == []
    (tmp_path / "c.py").write_text(
        'import torch\nSRC = r"""\nnamespace at { namespace native {\n'
        '__global__ void vectorized_elementwise_kernel(const float* x) {}\n} }\n'
        'namespace mine::inner {\nstruct S { int a; };\n__global__ void k2(int n) { if (n) { } }\n}\n'
        'namespace {\n__global__ void hidden(int n) {}\n}\n__global__ void top(int n) {}\n"""\n'
        'class ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return {"x": x}["x"]\n')
    names = cuda_kernel_names(load_candidate(tmp_path / "c.py"))
    assert names == ["at::native::vectorized_elementwise_kernel", "mine::inner::k2", "hidden", "top"], names
    assert ra.kernel_findings(only_torch, names, []) == []  # declared in at::native by the candidate: its own


def _chrome(kernels: list[tuple[str, int, int, int, list[tuple[str, int, int]]]]) -> dict:
    """A torch.profiler chrome trace: per kernel (name, stream, correlation, launch ts, enclosing ops (name, ts,
    dur))."""
    events = [{"ph": "X", "cat": "kernel", "name": "fill_marker", "ts": 1, "dur": 1, "args": {"stream": 7}}]
    for name, stream, corr, ts, ops in kernels:
        events.append({"ph": "X", "cat": "kernel", "name": name, "ts": 1000 + ts, "dur": 5,
                       "args": {"stream": stream, "correlation": corr}})
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": ts, "dur": 2, "tid": 1,
                       "args": {"correlation": corr}})
        events += [{"ph": "X", "cat": "cpu_op", "name": op, "ts": t, "dur": d, "tid": 1} for op, t, d in ops]
    return {"traceEvents": events}


def test_side_stream_of_a_library_op_is_the_library_not_the_candidate() -> None:
    """cuDNN ran conv_transpose's dgrad kernels on a stream of its own (H200, KernelBench level1/72 and /75,
    torch's own call): not a side-stream rejection, unless an op was dispatched off the caller's stream."""
    from kernelpilot.evaluation.audit.kernel_trace import parse_trace

    conv = [("aten::conv_transpose3d", 0, 100), ("aten::cudnn_convolution_transpose", 10, 80)]
    trace = parse_trace(_chrome([("triton_poi_fused_0", 7, 1, 500, []),
                                 ("void convolveNd_dgrad_float_engine<float>", 14, 2, 20, conv)]))
    assert trace.home_stream == 7 and [s for _, s in trace.kernels] == [14, 7]  # time order
    assert trace.launched_by == [("aten::conv_transpose3d", "aten::cudnn_convolution_transpose"), ()]
    # torch's own call runs no kernel of the candidate's (the dgrad kernel is cuDNN's: aten launched it), so the
    # stream question is asked of side-stream findings alone
    assert [f.rule for f in ra.kernel_findings(trace, [], [])] == ["no-custom-kernel", "library-kernel", "side-stream"]
    trace.watched_dispatch = True  # dispatch not watched (above): reject; watched: the library's own stream
    assert [f.rule for f in ra.kernel_findings(trace, [], [])] == ["no-custom-kernel", "library-kernel"]
    assert [f.rule for f in ra.kernel_findings(trace, [], ["cudnn"])] == ["library-only"]  # where cuDNN is allowed
    trace.off_stream_ops = ["convolution"]  # the candidate made another stream current: its doing
    assert "side-stream" in [f.rule for f in ra.kernel_findings(trace, [], [])]
    # an elementwise aten op's kernel on another stream is never the library's (nor the candidate's own)
    own = parse_trace(_chrome([("scale_kernel", 13, 1, 5, [("aten::mul", 0, 50)])]))
    own.watched_dispatch = True
    assert [f.rule for f in ra.kernel_findings(own, ["scale_kernel"], [])] == ["no-custom-kernel", "side-stream"]
    # ... and a kernel of the candidate's own (launched outside every aten op) on another stream is its doing
    own = parse_trace(_chrome([("scale_kernel", 13, 1, 5, [("aten::empty", 0, 3)])]))
    own.watched_dispatch = True
    assert [f.rule for f in ra.kernel_findings(own, ["scale_kernel"], [])] == ["side-stream"]


def test_a_kernel_an_aten_op_launched_is_never_the_candidates() -> None:
    """The H100 folder run of 2026-12-05: a try/except whose fallback (nn.Linear) always runs was `ok`, because
    cuBLAS's small-GEMM kernel matched no library name and counted as the candidate's. Launched inside
    aten::addmm, it is cuBLAS's whatever its name; an unknown name outside every aten op is still the candidate's."""
    from kernelpilot.evaluation.audit.kernel_trace import parse_trace

    gemm = "void gemvNSP_kernel<float, float, float, float, 1, 16, 4, 1024, false>(float const*)"
    addmm = [("aten::linear", 0, 60), ("aten::addmm", 2, 50)]
    fallback = parse_trace(_chrome([(gemm, 7, 1, 10, addmm),
                                    ("void at::native::vectorized_elementwise_kernel<4, F>(int, F)", 7, 2, 70,
                                     [("aten::relu", 65, 20)])]))
    found = ra.kernel_findings(fallback, ["copy_kernel"], [])
    assert [f.rule for f in found] == ["no-custom-kernel", "library-kernel"] and "gemvNSP_kernel" in found[0].message
    # cuBLAS allowed (KernelBench's ops): still no kernel of its own that ran
    assert [f.rule for f in ra.kernel_findings(fallback, ["copy_kernel"], ["cublas"])] == ["no-custom-kernel"]
    # with no own names known: library-only where the project allows cuBLAS
    assert [f.rule for f in ra.kernel_findings(fallback, [], ["cublas"])] == ["library-only"]
    # an own kernel whose name the sources do not show (a macro made it), launched by the candidate itself
    mine = parse_trace(_chrome([("void MACRO_made_kernel<float>(float const*)", 7, 1, 100, [("aten::empty", 90, 5)]),
                                (gemm, 7, 2, 10, addmm)]))
    assert [f.rule for f in ra.kernel_findings(mine, ["copy_kernel"], [])] == ["library-kernel"]


def test_operator_recorder_notes_ops_dispatched_off_the_current_stream() -> None:
    x = torch.randn(64)
    ops, _ = ra.record_ops(lambda a: a * 2, [x])
    assert ops["mul"].off_stream == 0


def test_identities_notice_patched_timers() -> None:
    import time

    ids = ra.Identities()
    assert ids.changed() == []
    original = time.perf_counter
    try:
        time.perf_counter = lambda: 0.0  # type: ignore[assignment]
        found = ids.findings("during the test")
        assert [(f.rule, f.evidence) for f in found] == [("timer-patch", "time.perf_counter")]
    finally:
        time.perf_counter = original
    assert ids.changed() == []


def test_thread_snapshot_sees_new_python_threads() -> None:
    import threading

    before = ra.ThreadSnapshot.take()
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, name="sneaky-worker")
    t.start()
    try:
        found = ra.thread_findings(before, ra.ThreadSnapshot.take())
        assert [f.rule for f in found] == ["background-thread"] and "sneaky-worker" in found[0].evidence
    finally:
        stop.set()
        t.join()


def test_timing_statistics_and_host_gap() -> None:
    t = tm.summarise([1.0, 2.0, 3.0, 4.0, 100.0], [1.1, 2.1, 3.1, 4.1, 100.1], [[1.0, 2.0], [3.0, 4.0]])
    assert t.median_ms == 3.0 and t.min_ms == 1.0 and t.samples == 5 and t.q1_ms <= 3.0 <= t.q3_ms
    assert t.round_medians_ms == [1.5, 3.5]
    assert tm.noise_pct(t) == pytest.approx(100 * 2.0 / 6.0)
    from kernelpilot.verdict import Timing

    honest = {"eager": Timing(1.0, 1, 1, 1, 10, host_median_ms=1.03),
              "candidate": Timing(0.5, 0.5, 0.5, 0.5, 10, host_median_ms=0.53)}
    assert tm.host_gap_flag(honest, 0.2) is None
    hidden = {"eager": Timing(1.0, 1, 1, 1, 10, host_median_ms=1.03),
              "candidate": Timing(0.01, 0.01, 0.01, 0.01, 10, host_median_ms=0.9)}
    assert "outside the timed stream" in (tm.host_gap_flag(hidden, 0.2) or "")


def test_speed_of_light_and_flags() -> None:
    # 1 GiB read + 1 GiB written at 4 TB/s: floor ~0.537 ms, memory-bound
    s = sol.speed_of_light(bytes_moved=2 << 30, flops=2 << 30, copy_tbps=4.0, tflops=700.0, candidate_ms=0.6,
                           compiled_ms=1.2, source="measured")
    assert s.bound == "memory" and s.floor_ms == pytest.approx(0.5369, rel=1e-3)
    assert s.pct_of_ceiling == pytest.approx(100 * s.floor_ms / 0.6)
    assert s.achieved_tbps == pytest.approx((2 << 30) / 0.6e-3 / 1e12)
    assert sol.suspicion_flags(s, 0.6, 2.0) == []
    fast = sol.suspicion_flags(s, 0.3, 12.0)
    assert len(fast) == 2 and "roofline" in fast[0] and "10x" in fast[1]
    mm = sol.speed_of_light(bytes_moved=3 * 8192 * 8192 * 2, flops=2 * 8192**3, copy_tbps=4.0, tflops=700.0,
                            candidate_ms=2.0, compiled_ms=None)
    assert mm.bound == "compute" and mm.compiled_pct_of_ceiling is None
    assert sol.roofline(None, None, 4.0, 700.0) == (None, "unknown")


def test_ceilings_cache_round_trip(tmp_path: Path) -> None:
    c = Ceilings(gpu="NVIDIA H200", driver="580.1", copy_tbps=4.25, tflops={"bfloat16": 700.0, "float32": 50.0},
                 measured_at="2026-11-30T10:00:00+00:00")
    path = save(c, tmp_path)
    assert json.loads(path.read_text())["gpu"] == "NVIDIA H200"
    assert load_cached("NVIDIA H200", "580.1", tmp_path) == c
    assert load_cached("NVIDIA H200", "581.0", tmp_path) is None  # another driver: measure again
    assert c.flops_rate("float16") == 700.0 and c.flops_rate("int8") is None


def test_fp32_convolutions_count_at_the_tf32_rate_matmuls_only_when_switched_on() -> None:
    """On the H200 an fp32 cuDNN convolution ran at 190-450% of an fp32-SIMT speed of light: under torch's
    default cudnn.allow_tf32 it runs on tensor cores, so its flops are held to the TF32 rate."""
    from types import SimpleNamespace

    c = Ceilings(gpu="NVIDIA H200", driver="580.1", copy_tbps=4.25,
                 tflops={"bfloat16": 700.0, "float32": 50.0, "tf32": 400.0}, measured_at="2026-12-02")
    conv = {"convolution": 4 * 10**12}
    assert c.compute_rate("float32", conv, conv_tf32=True)[0] == 400.0
    assert c.compute_rate("float32", conv, conv_tf32=False) == (50.0, "")
    assert c.compute_rate("float32", {"mm": 10**12}, conv_tf32=True) == (50.0, "")  # matmul TF32 is off by default
    assert c.compute_rate("float32", {"mm": 10**12}, matmul_tf32=True)[0] == 400.0
    both, note = c.compute_rate("float32", {"convolution": 10**12, "mm": 10**12}, conv_tf32=True)
    assert abs(both - 2 / (1 / 400 + 1 / 50)) < 1e-9 and "convolution" in note and "mm" not in note
    assert c.compute_rate("bfloat16", conv, conv_tf32=True) == (700.0, "")
    old = Ceilings(gpu="g", driver="d", copy_tbps=4.0, tflops={"float32": 50.0})  # no TF32 figure: fp32 as before
    assert old.compute_rate("float32", conv, conv_tf32=True) == (50.0, "")
    info = {"bytes_moved": 10**6, "flops": 4 * 10**12, "flops_by_op": conv}
    s = sol.for_problem(info, "torch.float32", c, SimpleNamespace(cudnn_allow_tf32=True, matmul_allow_tf32=False),
                        candidate_ms=12.0, compiled_ms=12.0)
    assert s.bound == "compute" and abs(s.floor_ms - 10.0) < 1e-9 and round(s.pct_of_ceiling) == 83
    assert "TF32 for convolution" in s.ceiling_source and sol.suspicion_flags(s, 12.0, 1.0) == []
    held = sol.for_problem(info, "float32", c, SimpleNamespace(cudnn_allow_tf32=False, matmul_allow_tf32=False),
                           candidate_ms=12.0, compiled_ms=None)
    assert held.floor_ms == 80.0 and "precision" in sol.suspicion_flags(held, 12.0, 1.0)[0]


class _HostEvent:
    """A host-clock stand-in for torch.cuda.Event, to run the timing loop on CPU tensors."""

    def __init__(self, enable_timing: bool = True) -> None:
        self.t = 0.0

    def record(self) -> None:
        import time

        self.t = time.perf_counter()

    def elapsed_time(self, end: "_HostEvent") -> float:
        return (end.t - self.t) * 1000.0


def test_measure_interleaves_rotates_inputs_and_catches_replay() -> None:
    import time

    pristine = tm.Pristine(time.perf_counter, _HostEvent, _HostEvent.record, _HostEvent.elapsed_time, lambda: None)
    pool = [[torch.randn(256, 256)] for _ in range(3)]
    seen: list[tuple[str, int]] = []

    def refill(inputs: list) -> None:
        inputs[0].normal_()

    def tracking(name: str):  # type: ignore[no-untyped-def]
        def fn(x: torch.Tensor) -> torch.Tensor:
            seen.append((name, x.data_ptr()))
            return x * 2
        return fn

    settings = tm.TimingSettings(warmup=2, rounds=2, samples_per_round=6, replay_checks=4, flush_bytes=1 << 20)
    run = tm.measure({"eager": tracking("eager"), "candidate": tracking("candidate")}, pool, refill, settings,
                     pristine, "cpu", check=lambda c, e: "" if torch.equal(c, e) else "differs")
    assert run.timings["candidate"].samples == 12 and len(run.timings["eager"].round_medians_ms) == 2
    timed = seen[4:]  # after the warm-up calls
    assert len({p for _, p in timed}) == 3  # every input set of the pool was used
    assert [n for n, _ in timed[:4]] == ["eager", "candidate", "candidate", "eager"]  # order rotates
    assert run.replay_checked == 4 and run.replay_failures == []
    stale: dict = {}
    run = tm.measure({"eager": lambda x: x * 2, "candidate": lambda x: stale.setdefault(x.data_ptr(), x * 2)},
                     pool, refill, settings, pristine, "cpu", check=lambda c, e: "" if torch.equal(c, e) else "differs")
    assert run.replay_failures  # a pointer-keyed cache returns stale results on refilled inputs


class _NoSpin(tm.Spin):
    """The GPU spin without a GPU: records when it was queued."""

    queued = 0

    def queue(self) -> None:
        type(self).queued += 1


def test_measure_alternates_device_and_launch_inclusive_samples(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    pristine = tm.Pristine(time.perf_counter, _HostEvent, _HostEvent.record, _HostEvent.elapsed_time, lambda: None)
    pool = [[torch.randn(64, 64)] for _ in range(2)]
    monkeypatch.setattr(tm, "_spin_for", lambda calls, inputs, pristine, device: _NoSpin(cycles_per_ms=1e6, ms=1.0))
    monkeypatch.setattr(tm, "MAX_SPIN_MS", 1.0)  # the spin cannot grow past the 2 ms call

    def slow(x: torch.Tensor) -> torch.Tensor:  # issues for longer than the 1 ms spin
        time.sleep(0.002)
        return x * 2

    settings = tm.TimingSettings(warmup=1, rounds=2, samples_per_round=10, replay_checks=2, flush_bytes=1 << 20)
    run = tm.measure({"eager": lambda x: x * 2, "candidate": slow}, pool, lambda inputs: inputs[0].normal_(), settings,
                     pristine, "cpu", check=lambda c, e: "" if torch.equal(c, e) else "differs")
    cand = run.timings["candidate"]
    # even samples (and the replay-checked ones) are device-timed behind the spin, the rest launch-inclusive
    assert cand.samples == 10 and _NoSpin.queued == 2 * 10
    assert cand.launch_median_ms is not None and cand.host_median_ms is not None
    assert cand.host_median_ms >= cand.launch_median_ms >= 2.0
    # the candidate outlasted the (capped) spin every time: said in a note; eager never did
    assert any(n.startswith("candidate: 10 of 10") and "launch overhead" in n for n in run.notes)
    assert not any(n.startswith("eager: ") for n in run.notes)


def test_host_gap_uses_the_launch_inclusive_event_time() -> None:
    # device time hides launch overhead; the host clock is compared with the same calls' event time
    t = {"eager": Timing(1.0, 1, 1, 1, 10, host_median_ms=1.33, launch_median_ms=1.3),
         "candidate": Timing(0.5, 0.5, 0.5, 0.5, 10, host_median_ms=0.83, launch_median_ms=0.8)}
    assert tm.host_gap_flag(t, 0.2) is None
    t["candidate"] = Timing(0.05, 0.05, 0.05, 0.05, 10, host_median_ms=0.9, launch_median_ms=0.06)
    assert "outside the timed stream" in (tm.host_gap_flag(t, 0.2) or "")
