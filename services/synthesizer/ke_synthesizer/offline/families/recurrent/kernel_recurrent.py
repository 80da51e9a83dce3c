"""Recurrent layers (``nn.LSTM``, ``nn.GRU``, ``nn.RNN`` tanh / relu) as one launcher that
loops over time, launching the same two kernels whatever the sequence length.

Per layer: the input projection of every time step is one matmul per direction (rows =
the layer input's time steps x batch, ``x @ W_ih^T + b_ih``, fp32, both directions
side by side in one buffer). Then per time step ONE launch for both directions (grid
axis 2 = direction; the reverse direction walks the steps backwards): each program
computes a [BLOCK_B, BLOCK_H] tile of the new hidden state as ``h_prev @ W_hh^T`` for
every gate (one K loop, one accumulator per gate), adds ``b_hh`` and the step's input
projection, applies the gates and stores ``h`` (into the layer output and the final
state ``h_n``) and, for an LSTM, the cell state in place (each program reads and writes
only its own tile of it). The previous step's ``h`` is read from the layer output, so no
program overwrites what another still reads. The capture keeps such a module as one graph
node (frontend/recurrent.py), so neither the capture, the kernel count nor the candidate's
source depends on the sequence length.

The ``persistent`` knob replaces the per-step launches by ONE launch per layer (both
directions, grid axis 1): each program owns BLOCK_B rows of the batch and every hidden
unit and loops over time inside the kernel, running the same tile code for each
[BLOCK_B, BLOCK_H] tile of a step; a barrier among the program's threads orders one step's
stores of ``h`` before the next step's loads, and no grid-wide synchronisation is needed
because no other program reads those rows. Offered only under PERSISTENT_MAX_WEIGHTS.

``persistent`` = ``resident``: one launch per layer as ``on``, but a program holds the whole
layer in registers: W_hh (every gate, hidden padded to a power of two) and b_hh loaded once
before the time loop, h and c carried from step to step in registers, so a step is one
dependent chain of tl.dot and gate math with no load of h, no W_hh traffic and no barrier;
the stores of h to the layer output are never read back. Offered while the padded gates x
H x H stays under RESIDENT_MAX_WEIGHTS; the seed (``auto``) runs it there, the per-step loop
past it."""

from __future__ import annotations

from typing import Any

import torch
import torch.fx
import torch.nn as nn

from ...emit.lower_pointwise import PointwiseEmitter
from ...emit.precision import CUBLAS, CUDNN, dot_precision, dot_precisions, dot_seed
from ...frontend.fx_meta import dtype_of, shape_of
from ...frontend.ops import NormOp
from ...frontend.recurrent import CellLoop, ManualCell, loop_mode
from ...plan.plan import Group, Plan, PlanContext
from ..family import Emitted, KernelFamily, LaunchArgs, Recognised

# gates per mode (rows of W_ih / W_hh per hidden unit, torch's order)
_GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}
# input projection tiles: rows (time steps x batch) x gate columns x K
_PROJ_BLOCKS = (64, 64, 32)
# Both bounds are on a layer's W_hh, gates x H x H elements per direction: what one program
# of the persistent kernel streams (from L2) and multiplies per batch row and step (no
# register or scratch size grows with H: registers hold BLOCK_B x BLOCK_H per gate, h_prev is
# re-read from the layer output), while the per-step loop spreads a step over H / BLOCK_H
# programs but pays a launch per step. Timed by bench/recurrent_persistent.py on one NVIDIA
# H100 80GB HBM3 (2026-11-28, torch 2.11.0+cu130, triton 3.6.0, CUDA 13.0; the judge's
# protocol; bench/RESULTS.md), ms, per-step loop -> persistent:
#   the four recurrent examples, 1,369-3,844 weights: device 1.5-2.8x faster, per call
#     2-2.7x (LSTM 3,844: 0.339 -> 0.223 device, 0.904 -> 0.432 per call);
#   one layer, batch 64, 128 steps, 16,384-65,536 weights: device 1.4-3.2x slower (RNN
#     16,384: 0.745 -> 1.036), per call still faster (3.492 -> 1.036; LSTM 65,536: 3.185 -> 2.834);
#   196,608-262,144 weights: slower both ways, per call 1.3-3.1x, device 3.2-7.3x (LSTM
#     262,144: 3.486 -> 9.694 per call).
# Offered to the search up to 2^16 (LSTM hidden <= 128, GRU <= 147, tanh / relu RNN <= 256),
# where it may still win per call; past it the per-step loop is kept and the knob not
# offered (at 2^16 the LSTM's persistent step already takes about 22 us, 2.834 ms / 128).
PERSISTENT_MAX_WEIGHTS = 1 << 16
# The register-resident form holds gates x HP x HP fp32 weights (HP: hidden padded to a power
# of two, at least 16) per program; bounded at 2^14 (an LSTM up to hidden 64, a GRU up to 64,
# a tanh / relu RNN up to 128): there ptxas (sm_90) gives an LSTM of hidden 64 255 registers
# and 128 bytes of spills at 4 warps (172 registers, no spill, at 8), an RNN of 128 120 bytes.
RESIDENT_MAX_WEIGHTS = 1 << 14
# The seed (``auto``) runs resident wherever it fits, the per-step loop past it (the
# persistent form seeded up to 2^13 weights before the resident one existed; every such
# layer fits the resident bound). Timed by bench/recurrent_persistent.py on one NVIDIA H100
# 80GB HBM3 (2026-11-28, torch 2.11.0+cu130, triton 3.6.0; results/recurrent_resident_h100_*.json),
# device ms, persistent -> resident (4 warps, BLOCK_B auto), faster in all 19 cases:
#   the six recurrent examples at GPU size: LSTM classifier 0.220 -> 0.124, GRU over 2,048
#     rows 0.047 -> 0.040, LSTM cell loop 0.078 -> 0.066, GRU cell loop 6.709 -> 3.435;
#   batch 64, 128 steps: LSTM h32 0.394 -> 0.264, h64 (2^14, spilling) 0.968 -> 0.424,
#     GRU h64 0.743 -> 0.422 (0.311 at 8 warps), RNN h128 1.012 -> 0.409 (0.317 at 8 warps);
#   batch 4,096, 16 steps: LSTM h64 0.386 -> 0.252 (cuDNN 0.493), GRU h64 0.277 -> 0.162.
# The per-step loop lost to it in all 19 too (RNN h64 at batch 4,096: 0.128 -> 0.068).
# The fused input projection keeps W_ih beside W_hh: tl.dot's tf32x3 keeps both operands'
# high and low parts in shared memory (Triton 3.6's TTGIR for the resident LSTM: 8 [32, 32]
# fp32 tiles of W_hh), 8 bytes a weight; 3 x 2^13 padded weights is 192 KiB of the H100's
# 227 KiB a block.
FUSED_MAX_WEIGHTS = 3 << 13
# knob ``persistent``: auto (the seed's form by size), off (per-step loop), on (persistent,
# W_hh streamed), resident (persistent, the layer held in registers)
PERSISTENT_CHOICES = ("auto", "off", "on", "resident")
# the three forms a layer runs as
STEP, PERSISTENT, RESIDENT = "step", "persistent", "resident"


def _weights(extra: dict[str, Any]) -> int:
    """A recurrent layer's W_hh elements per direction (the recogniser's ``extra``)."""
    return _GATES[extra["mode"]] * extra["hidden"] ** 2


def padded_hidden(extra: dict[str, Any]) -> int:
    """The hidden size as the resident kernel's tiles hold it: a power of two, at least 16
    (tl.dot's smallest K and N)."""
    return max(16, 1 << (int(extra["hidden"]) - 1).bit_length())


def _resident_weights(extra: dict[str, Any]) -> int:
    return _GATES[extra["mode"]] * padded_hidden(extra) ** 2


def persistent_fits(extra: dict[str, Any]) -> bool:
    """Whether a recurrent layer (the recogniser's ``extra``) may run persistent."""
    return _weights(extra) <= PERSISTENT_MAX_WEIGHTS


def resident_fits(extra: dict[str, Any]) -> bool:
    """Whether a recurrent layer may run register-resident."""
    return _resident_weights(extra) <= RESIDENT_MAX_WEIGHTS


def fused_fits(extra: dict[str, Any]) -> bool:
    """Whether a resident layer may also hold W_ih (``input_proj`` = fused): W_hh and W_ih
    of every gate, padded, at most FUSED_MAX_WEIGHTS (the widest layer input: the first
    layer's features, a later layer's directions x hidden)."""
    widest = max(int(extra.get("input_size", 0)), extra["dirs"] * extra["hidden"] if extra["layers"] > 1 else 0)
    if not widest:
        return False  # the input width is unknown: not offered
    kp = max(16, 1 << (widest - 1).bit_length())
    return resident_fits(extra) and _GATES[extra["mode"]] * padded_hidden(extra) * (padded_hidden(extra) + kp) \
        <= FUSED_MAX_WEIGHTS


def form_of(extra: dict[str, Any], choice: str) -> str:
    """The form a layer runs as under ``persistent`` = ``choice`` (``auto``: resident where
    it fits); a choice past its capacity rule keeps the per-step loop."""
    if choice in ("auto", "resident"):
        return RESIDENT if resident_fits(extra) else STEP
    return PERSISTENT if choice == "on" and persistent_fits(extra) else STEP


def _gate_lines(mode: str) -> list[str]:
    """The gate math of a tile (step and persistent kernels) on fp32 values: ``a<g>`` hidden projections (with
    ``b_hh``), ``x<g>`` input projections (with ``b_ih``), ``hp`` the previous state's tile,
    ``cp`` an LSTM's previous cell state; sets ``h`` (and ``c``)."""
    if mode == "lstm":  # gates i, f, g, o
        return ["    i = tl.sigmoid(x0 + a0)", "    f = tl.sigmoid(x1 + a1)", "    g = _tanh(x2 + a2)",
                "    o = tl.sigmoid(x3 + a3)", "    c = f * cp + i * g", "    h = o * _tanh(c)"]
    if mode == "gru":  # gates r, z, n: n = tanh(x_n + r * (h W_hn^T + b_hn))
        return ["    r = tl.sigmoid(x0 + a0)", "    z = tl.sigmoid(x1 + a1)", "    n = _tanh(x2 + r * a2)",
                "    h = (1.0 - z) * n + z * hp"]
    if mode == "rnn_relu":
        return ["    h = tl.maximum(x0 + a0, 0.0)"]
    return ["    h = _tanh(x0 + a0)"]


def _kernels(name: str, mode: str, precision: str, form: str, prefetch: bool, fused: bool = False) -> str:
    prec, notes = dot_precision(precision)
    dot = f'tl.dot({{}}, {{}}, input_precision="{prec}")'
    proj = [
        "@triton.jit",
        f"def {name}_proj(a_ptr, w_ptr, b_ptr, c_ptr, M, N, K, ldc, col0,",
        "               HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):",
        "    # The input projection of every time step of one direction: C[:, col0:col0 + N] =",
        "    # A @ W^T + b, A [M, K] (rows: time steps x batch), W [N, K], both row-major.",
        *(f"    {n}" for n in notes),
        "    # int64 rows: T x B rows of K or D x G x H elements may pass 2**31",
        "    rm = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)",
        "    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)",
        "    rk = tl.arange(0, BLOCK_K)",
        "    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)",
        "    for k0 in range(0, K, BLOCK_K):",
        "        kk = k0 + rk",
        "        a = tl.load(a_ptr + rm[:, None] * K + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K),",
        "                    other=0.0).to(tl.float32)",
        "        w = tl.load(w_ptr + rn[None, :] * K + kk[:, None], mask=(rn[None, :] < N) & (kk[:, None] < K),",
        "                    other=0.0).to(tl.float32)",
        f"        acc += {dot.format('a', 'w')}",
        "    if HAS_BIAS:",
        "        acc += tl.load(b_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]",
        "    tl.store(c_ptr + rm[:, None] * ldc + col0 + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))",
    ]
    if form == RESIDENT:
        second = _resident_kernel(name, mode, dot, notes, prefetch, fused)
    else:
        second = (_persistent_kernel if form == PERSISTENT else _step_kernel)(name, mode, dot, notes)
    if fused:  # no projection kernel: the resident one projects each step itself
        return "\n".join(second) + "\n"
    return "\n".join(proj) + "\n\n\n" + "\n".join(second) + "\n"


def _step_kernel(name: str, mode: str, dot: str, notes: list[str]) -> list[str]:
    """One time step of one layer, both directions, in one launch (the per-step loop)."""
    return [
        "@triton.jit",
        f"def {name}_step(xp_ptr, hp_ptr, out_ptr, hn_ptr, c_ptr, w0_ptr, w1_ptr, b0_ptr, b1_ptr,",
        "               step, T, B, H, xrt, xrb, xld, ost, osb, hp_off, hp_st, hp_ds, hp_sb, s_off,",
        "               HAS_BIAS: tl.constexpr, BLOCK_B: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr):",
        f"    # One time step of one layer, both directions ({mode}): a [BLOCK_B, BLOCK_H] tile of the",
        "    # new hidden state from h_prev @ W_hh^T per gate, b_hh, the step's input projection (xp,",
        "    # fp32, b_ih added) and the gates; h goes to the layer output and h_n, c in place.",
        "    # h_prev: h0 at step 0 (hp_st = 0), else the previous step's output (launcher's choice).",
        *(f"    {n}" for n in notes),
        "    d = tl.program_id(2)",
        "    rb = (tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)).to(tl.int64)  # offsets may pass 2**31",
        "    rj = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)",
        "    rk = tl.arange(0, BLOCK_K)",
        "    tile = (rb[:, None] < B) & (rj[None, :] < H)",
        "    t = (step + d * (T - 1 - 2 * step)).to(tl.int64)  # the reverse direction walks backwards",
        *_direction_lines(),
        "    hp = hp_ptr + hp_off + (t - 1 + 2 * d) * hp_st + d * hp_ds",
        *_tile_lines(mode, dot, "hp + rb[:, None] * hp_sb", "tile"),
    ]


def _direction_lines() -> list[str]:
    return ["    if d == 0:", "        w_ptr = w0_ptr", "        bh_ptr = b0_ptr", "    else:",
            "        w_ptr = w1_ptr", "        bh_ptr = b1_ptr"]


def _tile_lines(mode: str, dot: str, h_rows: str, hn_mask: str) -> list[str]:
    """One [BLOCK_B, BLOCK_H] tile of the new state (rows ``rb``, hidden units ``rj``, mask
    ``tile``, time step ``t``, direction ``d``) at a kernel body's depth: ``h_rows`` addresses
    h_prev's rows as a [BLOCK_B, 1] pointer block, ``hn_mask`` guards the store to h_n. The
    step kernel's whole body; the persistent kernel runs it inside its loops."""
    gates = _GATES[mode]
    accs = [f"    acc{g} = tl.zeros([BLOCK_B, BLOCK_H], dtype=tl.float32)" for g in range(gates)]
    loads = [f"        w{g} = tl.load(w_ptr + ({g} * H + rj[None, :]) * H + kk[:, None], mask=wmask, other=0.0)"
             ".to(tl.float32)" for g in range(gates)]
    adds = [f"        acc{g} += {dot.format('hk', f'w{g}')}" for g in range(gates)]
    fin: list[str] = []
    for g in range(gates):
        fin += [f"    a{g} = acc{g}",
                "    if HAS_BIAS:",
                f"        a{g} += tl.load(bh_ptr + {g} * H + rj, mask=rj < H, other=0.0).to(tl.float32)[None, :]",
                f"    x{g} = tl.load(xp_ptr + xrow[:, None] * xld + d * {gates} * H + {g} * H + rj[None, :],"
                " mask=tile, other=0.0)"]
    body = [
        *accs,
        "    for k0 in range(0, H, BLOCK_K):",
        "        kk = k0 + rk",
        f"        hk = tl.load({h_rows} + kk[None, :], mask=(rb[:, None] < B) & (kk[None, :] < H),",
        "                     other=0.0).to(tl.float32)",
        "        wmask = (rj[None, :] < H) & (kk[:, None] < H)",
        *loads,
        *adds,
        "    xrow = t * xrt + rb * xrb",
        *fin,
    ]
    state = "s_off + d * B * H + rb[:, None] * H + rj[None, :]"
    if mode == "gru":
        body.append(f"    hp = tl.load({h_rows} + rj[None, :], mask=tile, other=0.0).to(tl.float32)")
    if mode == "lstm":
        body.append(f"    cp = tl.load(c_ptr + {state}, mask=tile, other=0.0).to(tl.float32)")
    body += _gate_lines(mode)
    if mode == "lstm":
        body.append(f"    tl.store(c_ptr + {state}, c.to(c_ptr.dtype.element_ty), mask=tile)")
    body += ["    tl.store(out_ptr + t * ost + rb[:, None] * osb + d * H + rj[None, :],"
             " h.to(out_ptr.dtype.element_ty), mask=tile)",
             f"    tl.store(hn_ptr + {state}, h.to(hn_ptr.dtype.element_ty), mask={hn_mask})"]
    return body


def _persistent_kernel(name: str, mode: str, dot: str, notes: list[str]) -> list[str]:
    """Every time step of one layer in one launch (the ``persistent`` knob): a program owns
    BLOCK_B rows of the batch and all hidden units and loops over time itself."""
    return [
        "@triton.jit",
        f"def {name}_seq(xp_ptr, h0_ptr, out_ptr, hn_ptr, c_ptr, w0_ptr, w1_ptr, b0_ptr, b1_ptr,",
        "               T, B, H, xrt, xrb, xld, ost, osb, s_off,",
        "               HAS_BIAS: tl.constexpr, BLOCK_B: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr):",
        f"    # Every time step of one layer, both directions ({mode}), in one launch: a program owns",
        "    # BLOCK_B rows of the batch and every hidden unit and walks the steps itself (the reverse",
        "    # direction backwards). Per step and [BLOCK_B, BLOCK_H] tile of the new state: h_prev @",
        "    # W_hh^T per gate (W_hh streamed in tiles; it stays in L2), b_hh, the step's input",
        "    # projection (xp, fp32, b_ih added) and the gates; h goes to the layer output, which is",
        "    # the next step's h_prev, and at the last step to h_n; c in place. Only this program",
        "    # reads its rows, so a barrier among its own threads orders one step's stores before the",
        "    # next step's loads: no grid-wide synchronisation.",
        *(f"    {n}" for n in notes),
        "    d = tl.program_id(1)",
        "    rb = (tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)).to(tl.int64)  # offsets may pass 2**31",
        "    rk = tl.arange(0, BLOCK_K)",
        *_direction_lines(),
        "    hrow = h0_ptr + s_off + d * B * H + rb * H  # h_prev's rows: h0, then the previous step's output",
        "    for step in range(0, T):",
        "        t = (step + d * (T - 1 - 2 * step)).to(tl.int64)",
        "        last = step == T - 1",
        "        for j0 in range(0, H, BLOCK_H):",
        "            rj = j0 + tl.arange(0, BLOCK_H)",
        "            tile = (rb[:, None] < B) & (rj[None, :] < H)",
        *("        " + ln for ln in _tile_lines(mode, dot, "hrow[:, None]", "tile & last")),
        "        tl.debug_barrier()  # this step's h, stored by all of the program's threads, is read next",
        "        hrow = out_ptr + t * ost + rb * osb + d * H",
    ]


def _resident_kernel(name: str, mode: str, dot: str, notes: list[str], prefetch: bool = True,
                     fused: bool = False) -> list[str]:
    """Every time step of one layer in one launch with the layer in registers (``persistent``
    = ``resident``): a program owns BLOCK_B batch rows, loads W_hh and b_hh once, carries h
    (and c) from step to step and only stores h. ``prefetch``: the next step's input
    projection is loaded while this step computes (it does not depend on h). ``fused``: the
    input projection is computed here, per step, from the layer input's rows and W_ih, b_ih
    loaded once (no projection launch, no projection buffer); ``xp_ptr`` is then the layer
    input, ``xld`` its row length K."""
    gates = _GATES[mode]

    def x_loads(var: str, row: str, rows_mask: str) -> list[str]:
        if fused:  # the layer input's rows; their projection is this step's first tl.dot
            return [f"{var}in = tl.load(xp_ptr + {row}[:, None] * xld + ri[None, :],"
                    f" mask={rows_mask} & (ri[None, :] < K), other=0.0).to(tl.float32)"]
        tiles = rows_mask.replace("(rb[:, None] < B)", "tile")  # the rows and the hidden units
        return [f"{var}{g} = tl.load(xp_ptr + {row}[:, None] * xld + d * {gates} * H + {g} * H + rj[None, :],"
                f" mask={tiles}, other=0.0)" for g in range(gates)]
    lines = [
        "@triton.jit",
        f"def {name}_res(xp_ptr, h0_ptr, out_ptr, hn_ptr, c_ptr, w0_ptr, w1_ptr, b0_ptr, b1_ptr,",
        "               T, B, H, xrt, xrb, xld, ost, osb, s_off,",
        *(["               wi0_ptr, wi1_ptr, bi0_ptr, bi1_ptr, K,"] if fused else []),
        "               HAS_BIAS: tl.constexpr, BLOCK_B: tl.constexpr, HP: tl.constexpr"
        + (", KP: tl.constexpr):" if fused else "):"),
        f"    # Every time step of one layer, both directions ({mode}), in one launch, the layer held",
        "    # in registers: W_hh per gate as [HP, HP] tiles (hidden padded to HP, the padding",
        "    # zero) and b_hh loaded once; h (and c) carried from step to step, never re-read from",
        "    # memory; per step h_prev @ W_hh^T per gate, the step's input projection (xp, fp32,",
        "    # b_ih added) and the gates; h stored to the layer output, h_n (and c) after the last",
        "    # step. Padded hidden units stay zero and their W_hh rows are zero.",
        *(["    # Fused: the input projection x_t @ W_ih^T + b_ih per step here, W_ih per gate as",
           "    # [KP, HP] tiles and b_ih loaded once; xp_ptr is the layer input (rows of K)."] if fused else []),
        *(f"    {n}" for n in notes),
        "    d = tl.program_id(1)",
        "    rb = (tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)).to(tl.int64)  # offsets may pass 2**31",
        "    rj = tl.arange(0, HP)  # hidden units: the new state's columns",
        "    rk = tl.arange(0, HP)  # hidden units: the reduction over h_prev",
        *_direction_lines(),
        "    tile = (rb[:, None] < B) & (rj[None, :] < H)",
        *_held_weights(gates, "w", "bh", "rk", "H"),
    ]
    if fused:
        lines += [
            "    ri = tl.arange(0, KP)  # input features: the reduction of the input projection",
            "    if d == 0:",
            "        wi_ptr = wi0_ptr",
            "        bi_ptr = bi0_ptr",
            "    else:",
            "        wi_ptr = wi1_ptr",
            "        bi_ptr = bi1_ptr",
            *_held_weights(gates, "wi", "bi", "ri", "K"),
        ]
    lines += [
        "    state = s_off + d * B * H + rb[:, None] * H + rj[None, :]",
        "    h = tl.load(h0_ptr + state, mask=tile, other=0.0).to(tl.float32)",
    ]
    if mode == "lstm":
        lines.append("    c = tl.load(c_ptr + state, mask=tile, other=0.0).to(tl.float32)")
    rows = "(rb[:, None] < B)"
    if prefetch:
        lines += [
            "    # the first step's input projection; each step loads the next one's before its own",
            "    # math, so that the load's latency is spent on the step, not on the chain over h",
            "    xrow = (d * (T - 1)).to(tl.int64) * xrt + rb * xrb",
            *("    " + ln for ln in x_loads("x", "xrow", rows)),
            "    for step in range(0, T):",
            "        t = (step + d * (T - 1 - 2 * step)).to(tl.int64)  # the reverse direction walks backwards",
            "        nrow = (step + 1 + d * (T - 3 - 2 * step)).to(tl.int64) * xrt + rb * xrb  # the next step's",
            *("        " + ln for ln in x_loads("n", "nrow", f"{rows} & (step + 1 < T)")),
        ]
    else:
        lines += [
            "    for step in range(0, T):",
            "        t = (step + d * (T - 1 - 2 * step)).to(tl.int64)  # the reverse direction walks backwards",
            "        xrow = t * xrt + rb * xrb",
            *("        " + ln for ln in x_loads("x", "xrow", rows)),
        ]
    if fused:
        lines += [f"        x{g} = {dot.format('xin', f'wi{g}')} + bi{g}[None, :]" for g in range(gates)]
    lines += [f"        a{g} = {dot.format('h', f'w{g}')} + bh{g}[None, :]" for g in range(gates)]
    if mode == "gru":
        lines.append("        hp = h")
    if mode == "lstm":
        lines.append("        cp = c")
    lines += ["    " + ln for ln in _gate_lines(mode)]
    lines.append("        tl.store(out_ptr + t * ost + rb[:, None] * osb + d * H + rj[None, :],"
                 " h.to(out_ptr.dtype.element_ty), mask=tile)")
    if prefetch:
        lines += ["        xin = nin"] if fused else [f"        x{g} = n{g}" for g in range(gates)]
    lines.append("    tl.store(hn_ptr + state, h.to(hn_ptr.dtype.element_ty), mask=tile)")
    if mode == "lstm":
        lines.append("    tl.store(c_ptr + state, c.to(c_ptr.dtype.element_ty), mask=tile)")
    return lines


def _held_weights(gates: int, w: str, b: str, red: str, k: str) -> list[str]:
    """The resident kernel's loads, before the time loop, of one weight matrix per gate as a
    [reduction, HP] tile (``w<g>`` from ``<w>_ptr``, rows ``g * H + j`` of length ``k``,
    reduction index ``red``) and its bias (``b<g>``, zeros without one)."""
    return [
        f"    {w}mask = (rj[None, :] < H) & ({red}[:, None] < {k})",
        *(f"    {w}{g} = tl.load({w}_ptr + ({g} * H + rj[None, :]) * {k} + {red}[:, None], mask={w}mask,"
          " other=0.0).to(tl.float32)" for g in range(gates)),
        "    if HAS_BIAS:",
        *(f"        {b}{g} = tl.load({b}_ptr + {g} * H + rj, mask=rj < H, other=0.0).to(tl.float32)"
          for g in range(gates)),
        "    else:",
        *(f"        {b}{g} = tl.zeros([HP], dtype=tl.float32)" for g in range(gates)),
    ]


def _persistent_grid(dirs: int, block_b: str, resident: bool) -> list[str]:
    """The persistent and resident kernels' grid: programs of BLOCK_B batch rows each, per
    direction (``block_b`` the knob's value; ``auto`` by the batch)."""
    if block_b != "auto":
        rows = f"    bq = {int(block_b)}"
    elif resident:
        # A resident program's step is a chain of dependent tl.dot and gate math on its own
        # rows, latency-bound: 16 rows (tl.dot's smallest M) give the most programs, two per
        # SM of a 132-SM H100 before wider blocks share the loaded W_hh among more rows.
        # Measured (H100, recurrent_resident_h100_*.json): 64 rows a program was slower in all
        # 19 cases (LSTM h64 at batch 64: 0.424 -> 1.354 ms), 16 within 3% of this rule.
        rows = f"    bq = min(64, max(16, _pow2((B * {dirs} + 263) // 264)))"
    else:
        # Each program does a whole step's h_prev @ W_hh^T for its rows: 16 rows (tl.dot's
        # smallest M) give the most programs; past about 128 programs (an H100 has 132 SMs)
        # wider row blocks reuse each W_hh tile for more rows instead.
        rows = f"    bq = min(64, max(16, _pow2((B * {dirs} + 127) // 128)))"
    return [rows, f"    grid_q = ((B + bq - 1) // bq, {dirs})"]


def _launcher(name: str, mode: str, e: dict[str, Any], blocks: tuple[int, int, int], warps: int,
              form: str, block_b: str, fused: bool = False) -> str:
    layers, dirs, hidden, bf, bias = e["layers"], e["dirs"], e["hidden"], e["batch_first"], e["bias"]
    gates = _GATES[mode]
    bm, bn, bk = _PROJ_BLOCKS
    bh, bkk, _ = blocks
    lstm = mode == "lstm"
    lines = [
        f"def launch_{name}(x, hx, mod):",
        f"    # {mode}: {layers} layer(s) x {dirs} direction(s), hidden {hidden}; per layer one input",
        "    # projection per direction, then " + {
            STEP: "one launch per time step for both directions.",
            PERSISTENT: "one launch for every time step and both directions.",
            RESIDENT: "one launch for every time step and both directions, the layer in registers."}[form],
        "    # Weights are read from the module on every call (all_weights: a parameter may be replaced).",
        "    unbatched = x.dim() == 2",
        "    bf = not unbatched  # an unbatched sequence is time-major" if bf else "    bf = False",
        "    if unbatched:",
        "        x = x.unsqueeze(1)",
    ]
    if lstm:
        lines += ["        hx = None if hx is None else (hx[0].unsqueeze(1), hx[1].unsqueeze(1))",
                  "    h0, c0 = (None, None) if hx is None else hx"]
    else:
        lines += ["        hx = None if hx is None else hx.unsqueeze(1)", "    h0 = hx"]
    lines += [
        "    B, T = (x.shape[0], x.shape[1]) if bf else (x.shape[1], x.shape[0])",
        "    rows = T * B",
        f"    state = ({layers * dirs}, B, {hidden})",
        "    h0 = torch.zeros(state, device=x.device, dtype=x.dtype) if h0 is None else h0.contiguous()",
        "    hn = torch.empty(state, device=x.device, dtype=x.dtype)",
    ]
    if lstm:
        lines.append("    cn = torch.zeros(state, device=x.device, dtype=x.dtype) if c0 is None else "
                     "c0.clone(memory_format=torch.contiguous_format)  # updated in place")
    else:
        lines.append("    cn = hn  # no cell state")
    lines += [
        *([] if fused else [
            f"    xp = torch.empty((rows, {dirs * gates * hidden}), device=x.device, dtype=torch.float32)",
            f"    grid_p = ((rows + {bm - 1}) // {bm}, ({gates * hidden} + {bn - 1}) // {bn})"]),
        *(_persistent_grid(dirs, block_b, form == RESIDENT) if form != STEP else
          [f"    bb = {int(block_b)}" if block_b != "auto" else "    bb = min(64, max(16, _pow2(B)))",
           f"    grid_s = ((B + bb - 1) // bb, ({hidden} + {bh - 1}) // {bh}, {dirs})"]),
        "    weights = mod.all_weights" if not e.get("cell") else
        f"    weights = [[{', '.join(e['weights'])}]]  # a hand-written cell's Linear layers, gates in torch's order"
        if e.get("weights") else
        f"    weights = [[mod.weight_ih, mod.weight_hh, {'mod.bias_ih, mod.bias_hh' if bias else 'None, None'}]]"
        "  # a cell's, looped over time",
        "    inp = x.contiguous()",
        "    xrt, xrb = (1, T) if bf else (B, 1)  # row of (time step, batch) in the layer input",
        f"    for layer in range({layers}):",
        f"        last = layer == {layers - 1}",
        "        if last and bf:",
        f"            out = torch.empty((B, T, {dirs * hidden}), device=x.device, dtype=x.dtype)",
        f"            ost, osb = {dirs * hidden}, T * {dirs * hidden}",
        "        else:",
        f"            out = torch.empty((T, B, {dirs * hidden}), device=x.device, dtype=x.dtype)",
        f"            ost, osb = B * {dirs * hidden}, {dirs * hidden}",
        "        k = inp.shape[-1]",
        f"        ws = weights[layer * {dirs}:(layer + 1) * {dirs}]",
        *([] if fused else [
            f"        for d in range({dirs}):",
            f"            {name}_proj[grid_p](inp, ws[d][0], {'ws[d][2]' if bias else 'inp'}, xp, rows,"
            f" {gates * hidden}, k, {dirs * gates * hidden}, d * {gates * hidden},",
            f"                HAS_BIAS={bias}, BLOCK_M={bm}, BLOCK_N={bn}, BLOCK_K={bk}, num_warps=4)"]),
        "        w0, w1 = ws[0][1], ws[-1][1]",
        f"        b0, b1 = {'ws[0][3], ws[-1][3]' if bias else 'w0, w1'}",
        f"        s_off = layer * {dirs} * B * {hidden}",
    ]
    if form == RESIDENT and fused:
        lines += [
            "        # the input projection inside the kernel: the layer input's rows and W_ih, b_ih",
            f"        bi0, bi1 = {'ws[0][2], ws[-1][2]' if bias else 'w0, w1'}",
            f"        {name}_res[grid_q](inp, h0, out, hn, cn, w0, w1, b0, b1, T, B, {hidden}, xrt, xrb,",
            f"            k, ost, osb, s_off, ws[0][0], ws[-1][0], bi0, bi1, k, HAS_BIAS={bias},",
            f"            BLOCK_B=bq, HP={padded_hidden(e)}, KP=max(16, _pow2(k)), num_warps={warps})",
        ]
    elif form == RESIDENT:
        lines += [
            f"        {name}_res[grid_q](xp, h0, out, hn, cn, w0, w1, b0, b1, T, B, {hidden}, xrt, xrb,",
            f"            {dirs * gates * hidden}, ost, osb, s_off, HAS_BIAS={bias},",
            f"            BLOCK_B=bq, HP={padded_hidden(e)}, num_warps={warps})",
        ]
    elif form == PERSISTENT:
        lines += [
            f"        {name}_seq[grid_q](xp, h0, out, hn, cn, w0, w1, b0, b1, T, B, {hidden}, xrt, xrb,",
            f"            {dirs * gates * hidden}, ost, osb, s_off, HAS_BIAS={bias},",
            f"            BLOCK_B=bq, BLOCK_H={bh}, BLOCK_K={bkk}, num_warps={warps})",
        ]
    else:
        lines += [
            "        for step in range(T):",
            "            if step == 0:  # h_prev: this layer's h0, then the previous step's output",
            f"                hp, hp_off, hp_st, hp_ds, hp_sb = h0, s_off, 0, B * {hidden}, {hidden}",
            "            elif step == 1:",
            f"                hp, hp_off, hp_st, hp_ds, hp_sb = out, 0, ost, {hidden}, osb",
            f"            {name}_step[grid_s](xp, hp, out, hn, cn, w0, w1, b0, b1, step, T, B, {hidden}, xrt, xrb,",
            f"                {dirs * gates * hidden}, ost, osb, hp_off, hp_st, hp_ds, hp_sb, s_off, HAS_BIAS={bias},",
            f"                BLOCK_B=bb, BLOCK_H={bh}, BLOCK_K={bkk}, num_warps={warps})",
        ]
    lines.append("        inp, xrt, xrb = out, B, 1  # the next layer reads this one's output, time-major")
    ret_h = "(hn.squeeze(1), cn.squeeze(1))" if lstm else "hn.squeeze(1)"
    ret = "(hn, cn)" if lstm else "hn"
    lines += ["    if unbatched:", f"        return out.squeeze(1), {ret_h}", f"    return out, {ret}"]
    return "\n".join(lines) + "\n"


class RecurrentFamily(KernelFamily):
    """nn.LSTM / nn.GRU / nn.RNN modules: a loop over time launching the same kernels, or
    (``persistent``) one launch per layer looping over time inside the kernel."""

    kind = "recurrent"
    tuple_outputs = True
    knobs = {
        "BLOCK_H": ("32", "16", "64"),  # hidden units per program (step kernel) or per tile (persistent)
        "BLOCK_K": ("32", "64", "16"),  # the step's reduction chunk over the previous h
        "num_warps": ("4", "2", "8"),
        "precision": ("tf32x3", "ieee", "tf32"),
        # on: one launch per layer runs every time step (_persistent_kernel); off: one launch
        # per time step; resident: one launch per layer with the layer in registers
        # (_resident_kernel); auto (the seed): by size (form_of). Each only where it fits.
        "persistent": PERSISTENT_CHOICES,
        # batch rows per program; auto: by the batch and the form (_persistent_grid)
        "BLOCK_B": ("auto", "16", "32", "64"),
        # resident only: the next step's input projection loaded during this step, or at its
        # start. On an H100 (results/recurrent_resident_knobs_h100_*.json) prefetching was
        # faster in all 12 cases timed, 3-24% device (LSTM h32 at batch 4,096 0.116 -> 0.088 ms,
        # LSTM classifier 0.122 -> 0.110).
        "prefetch": ("on", "off"),
        # resident only: the input projection as a matmul launch per layer and direction over
        # every time step (separate), or inside the resident kernel, per step, from W_ih held
        # like W_hh (fused: one launch per layer, no projection buffer); where fused_fits
        "input_proj": ("separate", "fused"),
    }

    def recognise(self, node: torch.fx.Node, op: NormOp | None, ctx: PlanContext) -> Recognised | None:
        if op is not None or node.op != "call_module":
            return None
        mod = ctx.gm.get_submodule(str(node.target))
        if isinstance(mod, CellLoop):  # calls of a cell over the time steps (frontend/cell_loops.py)
            return self._cell_loop(node, mod, ctx)
        mode = loop_mode(mod)
        if mode is None or not isinstance(mod, nn.RNNBase) or not node.args or len(node.args) > 2 or node.kwargs:
            return None
        x = node.args[0]
        hx = node.args[1] if len(node.args) > 1 else None
        shape = shape_of(x)
        dtype = dtype_of(x)
        if shape is None or len(shape) not in (2, 3) or dtype != next(mod.parameters()).dtype:
            return None
        if mode == "lstm" and hx is not None and not (isinstance(hx, (tuple, list)) and len(hx) == 2):
            return None
        extra = {"mode": mode, "layers": mod.num_layers, "dirs": 2 if mod.bidirectional else 1,
                 "hidden": mod.hidden_size, "batch_first": bool(mod.batch_first), "bias": bool(mod.bias),
                 "path": str(node.target), "input_size": int(mod.input_size)}
        # nn.LSTM / GRU / RNN run on cuDNN in eager: TF32 allowed under the default contract; the
        # seed keeps tf32x3 but under strict (the resident kernels were timed with tf32x3)
        allowed = {"precision": dot_precisions(ctx.spec, torch.float32, ctx.precision, CUDNN)}
        seed = dot_seed(torch.float32, ctx.precision) if ctx.precision == "strict" else {}
        return NormOp("recurrent", {"input": x, "hx": hx}, extra=extra), {"allowed": allowed, "seed": seed}

    def group_knobs(self, plan: Plan, group: Group, genome: dict[str, str]) -> list[tuple[str, tuple[str, ...]]]:
        e = group.ops[group.members[0]].extra
        resident = form_of(e, self.value(genome, group, "persistent")) == RESIDENT
        out = []
        for name, choices in super().group_knobs(plan, group, genome):
            if name == "persistent":
                fits = {"auto": True, "off": True, "on": persistent_fits(e), "resident": resident_fits(e)}
                if not fits["on"] and not fits["resident"]:
                    continue
                # the explicit twin of what auto resolves to gives the same code
                twin = {STEP: "off", PERSISTENT: "on", RESIDENT: "resident"}[form_of(e, "auto")]
                chosen = genome.get(f"{group.key}.persistent")
                choices = tuple(c for c in choices if fits[c] and (c != twin or c == chosen))
            if name in ("BLOCK_H", "BLOCK_K") and resident:
                continue  # the resident kernel holds the whole padded layer: no hidden tiles
            if name == "prefetch" and not resident:
                continue
            if name == "input_proj" and not (resident and fused_fits(e)):
                continue
            out.append((name, choices))
        return out

    def _cell_loop(self, node: torch.fx.Node, loop: CellLoop, ctx: PlanContext) -> Recognised | None:
        """One layer, one direction: the cell's weights, batch first when the loop indexed
        ``x[:, t]``; the launcher reads the cell's module (its path in the model)."""
        x = node.args[0]
        shape = shape_of(x)
        if not loop.mode or len(node.args) != 2 or node.kwargs or shape is None or len(shape) not in (2, 3) \
                or dtype_of(x) != next(loop.cell.parameters()).dtype or (len(shape) == 2 and loop.time_dim):
            return None
        extra = {"mode": loop.mode, "layers": 1, "dirs": 1, "hidden": loop.hidden, "batch_first": loop.time_dim == 1,
                 "bias": bool(getattr(loop.cell, "bias", True)), "path": loop.path, "cell": True,
                 "input_size": int(shape[-1])}
        if isinstance(loop.cell, ManualCell):  # Linear layers and gate math (frontend/manual_cells.py)
            extra["weights"] = loop.cell.weight_sources("mod")
        # a cell's products run on cuBLAS in eager (no TF32 under the default contract)
        allowed = {"precision": dot_precisions(ctx.spec, torch.float32, ctx.precision, CUBLAS)}
        seed = dot_seed(torch.float32, ctx.precision) if ctx.precision == "strict" else {}
        return NormOp("recurrent", {"input": x, "hx": node.args[1]}, extra=extra), {"allowed": allowed, "seed": seed}

    def generate(self, plan: Plan, group: Group, genome: dict[str, str], emitter: PointwiseEmitter) -> Emitted:
        e = group.ops[group.members[0]].extra
        mode = e["mode"]
        name = f"rnn_{mode}_{group.gid}"
        blocks = (int(self.value(genome, group, "BLOCK_H")), int(self.value(genome, group, "BLOCK_K")), 0)
        warps = int(self.value(genome, group, "num_warps"))
        form = form_of(e, self.value(genome, group, "persistent"))
        if mode != "rnn_relu":
            emitter.needs("", "_tanh")
        fused = form == RESIDENT and fused_fits(e) and self.value(genome, group, "input_proj") == "fused"
        kernel = _kernels(name, mode, self.value(genome, group, "precision"), form,
                          self.value(genome, group, "prefetch") == "on", fused)
        launcher = _launcher(name, mode, e, blocks, warps, form, self.value(genome, group, "BLOCK_B"), fused)
        return kernel, launcher, f"launch_{name}"

    def launches(self, group: Group) -> int:
        # per layer one input projection per direction and (at least) one recurrence launch
        e = group.ops[group.members[0]].extra
        return int(e["layers"]) * (int(e["dirs"]) + 1)

    def launch_args(self, plan: Plan, group: Group) -> LaunchArgs:
        node = group.members[0]
        op = group.ops[node]
        return [op.args["input"], op.args["hx"], "@" + op.extra["path"]], [node]
