"""Kernel bodies of the convnd family (``kernel_convnd.py``): the lines between a
kernel's signature and its epilogue, for the implicit GEMM, the direct form and the
per-phase GEMM of transposed convolution. Each body ends with the names the epilogue
reads: ``acc``, ``mask``, ``cols`` (output channel), ``n_i`` / ``od_i`` / ``oh_i`` /
``ow_i`` (output coordinates) and ``out_off`` (NCDHW offset)."""

from __future__ import annotations

import math
from typing import Any


def taps_apply(e: dict[str, Any], gather: bool) -> bool:
    """Whether the ``taps`` reduction can run: every GEMM body but the transposed gather
    (whose per-tap divisibility test is what the phase form removes)."""
    return not (e["transposed"] and gather)


def body_gemm(e: dict[str, Any], gather: bool, reduction: str, split: bool, cl: bool, x_cast: str, w_cast: str,
              precision: str, note: list[str], ids: list[str]) -> list[str]:
    """The implicit GEMM of a convolution (a transposed one as a gather or, after zero
    insertion, as a stride-1 convolution). Reduction ``flat``: K = CIN_G x taps flattened,
    channel slowest, each K element decoded with div / mod and bounds-tested per (row, K)
    element; ``taps`` (not for the transposed gather): the taps outside, blocks of BLOCK_K
    channels inside, so decoding and bounds are per (row, tap) and the weight comes packed
    as [G, KD * KH * KW, CIN_G, COUT_G] (contiguous B tiles). ``split``: grid axis 2 is
    group x SPLIT_K and program ``sid`` sums its slice of K (``flat``) or of the channels
    (``taps``) and adds it atomically into a zeroed output. ``cl`` (``taps`` only): the input
    comes channels-last ([N, D, H, W, C], see ``_x_n``). ``ids``: the lines binding the
    program ids ``pid_m``, ``pid_n`` and ``g`` (``pid_z`` = group x SPLIT_K with ``split``),
    ``emit/grid.py``."""
    sd, sh, sw = e["s"] if gather else (1, 1, 1)
    dd, dh, dw = e["d"]
    head = [
        *ids,
        *(["    g = pid_z // SPLIT_K", "    sid = pid_z % SPLIT_K  # which K slice"] if split else []),
        "    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)",
        "    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)",
        "    M = NB * OD * OH * OW",
        "    KV = KD * KH * KW",
        "    K = CIN_G * KV",
        "    n_idx = rm // (OD * OH * OW)",
        "    od = (rm // (OH * OW)) % OD",
        "    oh = (rm // OW) % OH",
        "    ow = rm % OW",
        "    co = g * COUT_G + rn",
        "    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)",
    ]
    tail = ["    mask = (rm[:, None] < M) & (rn[None, :] < COUT_G)",
            "    cols = co[None, :]",
            "    n_i = n_idx[:, None]",
            "    od_i = od[:, None]",
            "    oh_i = oh[:, None]",
            "    ow_i = ow[:, None]",
            "    out_off = (n_i * (G * COUT_G) + cols) * (OD * OH * OW) + (od_i * OH + oh_i) * OW + ow_i"]
    dot = [*("        " + line for line in note), f'        acc += tl.dot(a, b, input_precision="{precision}")']
    if reduction == "taps" and taps_apply(e, gather):
        lines = head + [
            "    DHW = D * H * W",
            _x_n(cl),
            "    for tap in range(0, KV):",
            "        kd = tap // (KH * KW)",
            "        kh = (tap // KW) % KH",
            "        kw = tap % KW",
            "        ok = rm < M",
        ]
        lines += _taps(e, gather, "        ", ("od", "oh", "ow"), ("kd", "kh", "kw"), (sd, sh, sw), (dd, dh, dw))
        return lines + _channel_loop("ok", "tap", split, cl, x_cast, w_cast, dot) + tail
    lines = head + [
        *_k_loop("k0", "K", split),
        "        rk = k0 + tl.arange(0, BLOCK_K)",
        "        ci = rk // KV",
        "        kr = rk % KV",
        "        kd = kr // (KH * KW)",
        "        kh = (kr // KW) % KH",
        "        kw = kr % KW",
        "        ok = (rm[:, None] < M) & (rk[None, :] < K)",
    ]
    lines += _taps(e, gather, "        ", ("od[:, None]", "oh[:, None]", "ow[:, None]"),
                   ("kd[None, :]", "kh[None, :]", "kw[None, :]"), (sd, sh, sw), (dd, dh, dw))
    lines += [
        "        cin = g * CIN_G + ci[None, :]",
        "        a = tl.load(x_ptr + (((n_idx[:, None] * (G * CIN_G) + cin) * D + i_d) * H + i_h) * W + i_w,",
        f"                    mask=ok, other=0.0){x_cast}",
        "        b_mask = (rk[:, None] < K) & (rn[None, :] < COUT_G)",
    ]
    if e["transposed"] and gather:
        # weight [CIN, COUT_G, KD, KH, KW]: (g * CIN_G + ci, rn, kr)
        lines.append("        w_off = ((g * CIN_G + ci[:, None]) * COUT_G + rn[None, :]) * KV + kr[:, None]")
    else:
        # weight [COUT, CIN_G, KD, KH, KW]: row co holds its reduction contiguously
        lines.append("        w_off = co[None, :] * K + rk[:, None]")
    return lines + [f"        b = tl.load(w_ptr + w_off, mask=b_mask, other=0.0){w_cast}", *dot] + tail


def _k_loop(var: str, total: str, split: bool, ind: str = "    ") -> list[str]:
    """``for var in range(0, total, BLOCK_K)``, or with split-K over this program's slice
    (whole K tiles) of it."""
    if not split:
        return [f"{ind}for {var} in range(0, {total}, BLOCK_K):"]
    return [f"{ind}{var}_per = tl.cdiv(tl.cdiv({total}, SPLIT_K), BLOCK_K) * BLOCK_K",
            f"{ind}for {var} in range(sid * {var}_per, tl.minimum({total}, (sid + 1) * {var}_per), BLOCK_K):"]


def _x_n(cl: bool) -> str:
    """The row's offset of its sample and group's first channel: NCDHW, or channels-last
    [N, D, H, W, G * CIN_G] (``cl``: a row's channel block is one contiguous run)."""
    return "    x_n = n_idx * DHW * (G * CIN_G) + g * CIN_G" if cl else "    x_n = (n_idx * G + g) * CIN_G * DHW"


def _channel_loop(ok: str, tap: str, split: bool, cl: bool, x_cast: str, w_cast: str,
                  dot: list[str]) -> list[str]:
    """The inner loop of the ``taps`` reduction, inside the loop over taps: ``ok`` the
    rows whose tap lies inside the input, at ``i_d`` / ``i_h`` / ``i_w``; ``tap`` the index
    into the packed weight [G, KD * KH * KW, CIN_G, COUT_G]. Only channel offsets change
    per K tile (no division on the tile)."""
    return [
        ("        x_row = x_n + ((i_d * H + i_h) * W + i_w) * (G * CIN_G)" if cl else
         "        x_row = x_n + (i_d * H + i_h) * W + i_w"),
        f"        w_row = (g * KV + {tap}) * CIN_G",
        *_k_loop("c_0", "CIN_G", split, "        "),
        "            ci = c_0 + tl.arange(0, BLOCK_K)",
        f"            a = tl.load(x_ptr + x_row[:, None] + ci[None, :]{'' if cl else ' * DHW'},",
        f"                        mask={ok}[:, None] & (ci[None, :] < CIN_G), other=0.0){x_cast}",
        "            b = tl.load(w_ptr + (w_row + ci[:, None]) * COUT_G + rn[None, :],",
        f"                        mask=(ci[:, None] < CIN_G) & (rn[None, :] < COUT_G), other=0.0){w_cast}",
        *("    " + line for line in dot),
    ]


def _taps(e: dict[str, Any], gather: bool, ind: str, o: tuple[str, ...], k: tuple[str, ...],
          s: tuple[int, ...], d: tuple[int, ...]) -> list[str]:
    """Input coordinates i_d / i_h / i_w of the taps and their validity, and-ed into ``ok``."""
    lines: list[str] = []
    for c, oc, kc, sc, dc, size, pad in zip("dhw", o, k, s, d, "DHW", ("PD", "PH", "PW"), strict=True):
        tap = f"{kc} * {dc}" if dc != 1 else kc
        if e["transposed"] and gather:
            # output o reads input (o + pad - k * dil) / stride when that is a whole index
            lines.append(f"{ind}t_{c} = {oc} + {pad} - {tap}")
            if sc == 1:
                lines += [f"{ind}i_{c} = t_{c}", f"{ind}ok = ok & (t_{c} >= 0) & (t_{c} < {size})"]
            else:
                lines += [f"{ind}t_{c} = tl.where(t_{c} >= 0, t_{c}, 0 - {sc})  # negative: never a tap",
                          f"{ind}i_{c} = t_{c} // {sc}",
                          f"{ind}ok = ok & (t_{c} >= 0) & (t_{c} % {sc} == 0) & (i_{c} < {size})"]
        else:
            scaled = f"{oc} * {sc}" if sc != 1 else oc
            lines.append(f"{ind}i_{c} = {scaled} - {pad} + {tap}")
            mode = e.get("mode", "zeros")
            # padding_mode: torch requires padding < size (reflect) / <= size (circular), so
            # one fold brings every tap inside
            if mode == "reflect":
                lines += [f"{ind}i_{c} = tl.where(i_{c} < 0, 0 - i_{c}, i_{c})",
                          f"{ind}i_{c} = tl.where(i_{c} >= {size}, 2 * ({size} - 1) - i_{c}, i_{c})"]
            elif mode == "replicate":
                lines.append(f"{ind}i_{c} = tl.minimum(tl.maximum(i_{c}, 0), {size} - 1)")
            elif mode == "circular":
                lines.append(f"{ind}i_{c} = (i_{c} + {size}) % {size}")
            else:
                lines.append(f"{ind}ok = ok & (i_{c} >= 0) & (i_{c} < {size})")
    return lines


def phase_applies(e: dict[str, Any], form: str) -> bool:
    """The phase form: a transposed convolution, GEMM or direct form (any stride /
    padding / output_padding / dilation / groups)."""
    return bool(e["transposed"]) and form in ("gemm", "direct")


# reduction knob ``auto`` (GEMM form): one tap's channels per K tile (``taps``) once a group has at
# least this many input channels (tl.dot's smallest K tile), else tap x channel flattened
# (``flat``) so a K tile of a thin group is not mostly padding
TAPS_MIN_CIN_G = 16


def resolved_reduction(e: dict[str, Any], choice: str) -> str:
    return ("taps" if e["cin_g"] >= TAPS_MIN_CIN_G else "flat") if choice == "auto" else choice


def _phase_dim(c: str, s: int, dl: int, k: str) -> list[str]:
    """Per spatial dim: the phase's first tap ``k0_c``, tap step ``S'``, input offset
    ``c0_c``, input step ``D'`` per tap and tap count ``j_c``. Output o = r - pad + s * b
    uses tap k iff k * dil = r (mod s): with g = gcd(s, dil) that needs g | r, and then
    k = k0 + j * s / g (k0 = (r / g) * inv(dil / g) mod s / g), reading input
    (r + s * b - k * dil) / s = b + c0 - j * dil / g, c0 = (r - k0 * dil) / s (exact)."""
    g = math.gcd(s, dl)
    sp, dp = s // g, dl // g
    inv = pow(dp, -1, sp) if sp > 1 else 0
    k0 = f"((r_{c} // {g}) * {inv}) % {sp}" if g > 1 else (f"(r_{c} * {inv}) % {sp}" if dl > 1 else f"r_{c}")
    lines = [f"    k0_{c} = {k0 if sp > 1 else '0'}"]
    lines.append(f"    c0_{c} = (r_{c} - k0_{c} * {dl}) // {s}" if dl > 1 else f"    c0_{c} = 0")
    count = f"({k} - k0_{c} + {sp - 1}) // {sp}"
    lines.append(f"    j_{c} = tl.where(r_{c} % {g} == 0, {count}, 0)" if g > 1 else f"    j_{c} = {count}")
    return lines


def _times(name: str, k: int) -> str:
    return f"({name} * {k})" if k != 1 else name


def _phase_steps(e: dict[str, Any]) -> tuple[tuple[int, int], ...]:
    """(tap step s / g, input step dil / g) per dim d, h, w."""
    return tuple((s // math.gcd(s, dl), dl // math.gcd(s, dl)) for s, dl in zip(e["s"], e["d"], strict=True))


def body_phase(e: dict[str, Any], reduction: str, split: bool, cl: bool, x_cast: str, w_cast: str,
               precision: str, note: list[str], ids: list[str]) -> list[str]:
    """Transposed conv as one dense implicit GEMM per output phase r = (o + pad) % stride
    (sub-pixel decomposition): the outputs o = r - pad + stride * b of a phase all use the
    same taps, so the reduction walks only those (1 / stride^nd of the window for
    dilation 1) with no divisibility test. The weight comes packed by the launcher as
    [G, KD * KH * KW, CIN_G, COUT_G], so a B tile is a contiguous run of output channels.

    One launch covers every (phase, group, row tile, column tile), the phase fastest on a
    1-D grid: s^nd launches would pay the host overhead s^nd times where small operators
    are launch-bound, the phases are the same size within one row per dim (one grid fits
    all), and the s^nd programs of one output tile then run side by side: they read the
    same input rows and their stride-s stores fill each other's cache lines (``ids``: the
    line binding ``pid``, ``emit/grid.py``; one axis, nothing to fold)."""
    sd, sh, sw = e["s"]
    (spd, dpd), (sph, dph), (spw, dpw) = _phase_steps(e)
    lines = [
        *ids,
        *(["    sid = pid % SPLIT_K  # which K slice", "    pid = pid // SPLIT_K"] if split else []),
        f"    ph = pid % {sd * sh * sw}",
        f"    t = pid // {sd * sh * sw}",
        "    n_tiles = tl.cdiv(COUT_G, BLOCK_N)",
        "    pid_n = t % n_tiles",
        "    t = t // n_tiles",
        "    g = t % G",
        "    pid_m = t // G",
        *_phase_preamble(e),
        "    rows = nb_d * nb_h * nb_w",
        "    M = NB * rows",
        "    JV = j_d * j_h * j_w",
        "    KV = KD * KH * KW",
        "    DHW = D * H * W",
        "    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)",
        "    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)",
        "    n_idx = rm // tl.maximum(rows, 1)",
        "    b_d = b0_d + (rm // tl.maximum(nb_h * nb_w, 1)) % tl.maximum(nb_d, 1)",
        "    b_h = b0_h + (rm // tl.maximum(nb_w, 1)) % tl.maximum(nb_h, 1)",
        "    b_w = b0_w + rm % tl.maximum(nb_w, 1)",
        _x_n(cl),
        "    co = g * COUT_G + rn",
        "    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)",
    ]
    dot = [*("        " + line for line in note), f'        acc += tl.dot(a, b, input_precision="{precision}")']
    kr = f"((k0_d + {_times('jd', spd)}) * KH + k0_h + {_times('jh', sph)}) * KW + k0_w + {_times('jw', spw)}"
    if reduction == "taps":
        # taps outer, channels inner: the tap's coordinates, bounds and addresses are per row,
        # the inner loop only adds channel offsets (no division on the K tile)
        lines += [
            "    for tap in range(0, JV):",
            "        jd = tap // (j_h * j_w)",
            "        jh = (tap // j_w) % j_h",
            "        jw = tap % j_w",
            f"        i_d = b_d + c0_d - {_times('jd', dpd)}",
            f"        i_h = b_h + c0_h - {_times('jh', dph)}",
            f"        i_w = b_w + c0_w - {_times('jw', dpw)}",
            "        ok_m = (rm < M) & (i_d >= 0) & (i_d < D) & (i_h >= 0) & (i_h < H) & (i_w >= 0) & (i_w < W)",
            *_channel_loop("ok_m", kr, split, cl, x_cast, w_cast, dot),
        ]
    else:
        # tap x channel flattened (channel fastest) into one K of JV * CIN_G
        lines += [
            "    K = JV * CIN_G",
            *_k_loop("k_0", "K", split),
            "        rk = k_0 + tl.arange(0, BLOCK_K)",
            "        tap = rk // CIN_G",
            "        ci = rk % CIN_G",
            "        jd = tap // tl.maximum(j_h * j_w, 1)",
            "        jh = (tap // tl.maximum(j_w, 1)) % tl.maximum(j_h, 1)",
            "        jw = tap % tl.maximum(j_w, 1)",
            f"        i_d = b_d[:, None] + c0_d - {_times('jd', dpd)}[None, :]",
            f"        i_h = b_h[:, None] + c0_h - {_times('jh', dph)}[None, :]",
            f"        i_w = b_w[:, None] + c0_w - {_times('jw', dpw)}[None, :]",
            "        ok = (rm[:, None] < M) & (rk[None, :] < K) & (i_d >= 0) & (i_d < D) & (i_h >= 0) & (i_h < H)",
            "        ok = ok & (i_w >= 0) & (i_w < W)",
            "        a = tl.load(x_ptr + x_n[:, None] + ci[None, :] * DHW + (i_d * H + i_h) * W + i_w, mask=ok,",
            f"                    other=0.0){x_cast}",
            f"        w_off = ((g * KV + {kr}) * CIN_G + ci)[:, None] * COUT_G + rn[None, :]",
            "        b = tl.load(w_ptr + w_off, mask=(rk[:, None] < K) & (rn[None, :] < COUT_G), other=0.0)"
            f"{w_cast}",
            *dot,
        ]
    lines += [
        "    mask = (rm[:, None] < M) & (rn[None, :] < COUT_G)",
        "    cols = co[None, :]",
        "    n_i = n_idx[:, None]",
        f"    od_i = (r_d - PD + b_d * {sd})[:, None]",
        f"    oh_i = (r_h - PH + b_h * {sh})[:, None]",
        f"    ow_i = (r_w - PW + b_w * {sw})[:, None]",
        "    out_off = (n_i * (G * COUT_G) + cols) * (OD * OH * OW) + (od_i * OH + oh_i) * OW + ow_i",
    ]
    return lines


def _phase_preamble(e: dict[str, Any]) -> list[str]:
    """From the phase index ``ph``: its residues ``r_*``, the range ``b0_*`` + [0, ``nb_*``)
    of its outputs o = r - pad + s * b and its taps (``_phase_dim``) per dim."""
    sd, sh, sw = e["s"]
    lines = [f"    r_w = ph % {sw}", f"    r_h = (ph // {sw}) % {sh}", f"    r_d = ph // {sw * sh}"]
    for c, sc, dc, size in zip("dhw", (sd, sh, sw), e["d"], ("OD", "OH", "OW"), strict=True):
        pad = f"P{c.upper()}"
        # b of the phase's outputs: from ceil((pad - r) / s) to floor((O - 1 - r + pad) / s),
        # written with non-negative numerators (integer division truncates)
        lines += [f"    b0_{c} = ({pad} - r_{c} + {sc - 1}) // {sc}",
                  f"    nb_{c} = tl.maximum(({size} - 1 - r_{c} + {pad} + {sc}) // {sc} - b0_{c}, 0)"]
        lines += _phase_dim(c, sc, dc, f"K{c.upper()}")
    return lines


def body_direct_phase(e: dict[str, Any], x_cast: str, w_cast: str, ids: list[str]) -> list[str]:
    """The direct form of the phase decomposition (depthwise transposed convolution): grid
    axis 1 is the phase, so a program's lanes (outputs of one phase, flattened over batch,
    channel and the phase's positions) share its tap counts, and each lane walks only its
    phase's taps (loops of run-time length, no divisibility test) instead of the whole
    window. ``ids``: the lines binding ``pid`` and ``ph`` (two axes, folded past CUDA's
    limits: ``emit/grid.py``)."""
    sd, sh, sw = e["s"]
    (spd, dpd), (sph, dph), (spw, dpw) = _phase_steps(e)
    lines = [
        *ids,
        *_phase_preamble(e),
        "    rows = nb_d * nb_h * nb_w",
        "    C = G * COUT_G",
        "    n_ph = (n_out // tl.maximum(C * OD * OH * OW, 1)) * C * rows",
        "    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)",
        "    mask = offs < n_ph",
        "    b_w = b0_w + offs % tl.maximum(nb_w, 1)",
        "    b_h = b0_h + (offs // tl.maximum(nb_w, 1)) % tl.maximum(nb_h, 1)",
        "    b_d = b0_d + (offs // tl.maximum(nb_w * nb_h, 1)) % tl.maximum(nb_d, 1)",
        "    cols = (offs // tl.maximum(rows, 1)) % C",
        "    n_i = offs // tl.maximum(rows * C, 1)",
        f"    od_i = r_d - PD + b_d * {sd}",
        f"    oh_i = r_h - PH + b_h * {sh}",
        f"    ow_i = r_w - PW + b_w * {sw}",
        "    g = cols // COUT_G",
        "    rn = cols % COUT_G",
        "    out_off = ((n_i * C + cols) * OD + od_i) * OH * OW + oh_i * OW + ow_i",
        "    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)",
        "    for ci in range(0, CIN_G):",
        "        cin = g * CIN_G + ci",
        "        x_base = (n_i * (G * CIN_G) + cin) * D",
        "        w_base = (cin * COUT_G + rn) * (KD * KH * KW)",
        "        for jd in range(0, j_d):",
        f"            i_d = b_d + c0_d - {_times('jd', dpd)}",
        "            ok_d = mask & (i_d >= 0) & (i_d < D)",
        "            for jh in range(0, j_h):",
        f"                i_h = b_h + c0_h - {_times('jh', dph)}",
        "                ok_h = ok_d & (i_h >= 0) & (i_h < H)",
        "                for jw in range(0, j_w):",
        f"                    i_w = b_w + c0_w - {_times('jw', dpw)}",
        "                    ok = ok_h & (i_w >= 0) & (i_w < W)",
        f"                    kr = ((k0_d + {_times('jd', spd)}) * KH + k0_h + {_times('jh', sph)}) * KW"
        f" + k0_w + {_times('jw', spw)}",
        "                    xv = tl.load(x_ptr + ((x_base + i_d) * H + i_h) * W + i_w, mask=ok, "
        f"other=0.0){x_cast}",
        f"                    wv = tl.load(w_ptr + w_base + kr, mask=mask, other=0.0){w_cast}",
        "                    acc += xv * wv",
    ]
    return lines


def body_direct(e: dict[str, Any], gather: bool, x_cast: str, w_cast: str, ids: list[str]) -> list[str]:
    s = e["s"] if gather else (1, 1, 1)
    lines = [
        *ids,  # pid (the kernel's program id, emit/grid.py)
        "    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)",
        "    mask = offs < n_out",
        "    ow_i = offs % OW",
        "    oh_i = (offs // OW) % OH",
        "    od_i = (offs // (OW * OH)) % OD",
        "    cols = (offs // (OD * OH * OW)) % (G * COUT_G)",
        "    n_i = offs // (G * COUT_G * OD * OH * OW)",
        "    g = cols // COUT_G",
        "    rn = cols % COUT_G",
        "    out_off = offs",
        "    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)",
        "    for ci in range(0, CIN_G):",
        "        cin = g * CIN_G + ci",
        "        x_base = (n_i * (G * CIN_G) + cin) * D",
        ("        w_base = (cin * COUT_G + rn) * (KD * KH * KW)" if e["transposed"] and gather else
         "        w_base = (cols * CIN_G + ci) * (KD * KH * KW)"),
    ]
    return lines + _window(e, gather, s, ("od_i", "oh_i", "ow_i"), x_cast, ", mask=mask, other=0.0)" + w_cast)


def _window(e: dict[str, Any], gather: bool, s: tuple[int, ...], coords: tuple[str, str, str], x_cast: str,
            w_tail: str) -> list[str]:
    """The direct form's unrolled window (inside the channel loop: ``x_base``, ``w_base``):
    each tap's input coordinates from output coordinates ``coords``, its masked load,
    the weight load (``w_tail``: mask and cast) and the product."""
    ind = "                    "
    lines = ["        for kd in tl.static_range(KD):",
             "            for kh in tl.static_range(KH):",
             "                for kw in tl.static_range(KW):",
             f"{ind}ok = mask"]
    lines += _taps(e, gather, ind, coords, ("kd", "kh", "kw"), s, e["d"])
    return lines + [f"{ind}xv = tl.load(x_ptr + ((x_base + i_d) * H + i_h) * W + i_w, mask=ok, other=0.0){x_cast}",
                    f"{ind}wv = tl.load(w_ptr + w_base + (kd * KH + kh) * KW + kw{w_tail}",
                    f"{ind}acc += xv * wv"]


def body_direct_tiled(e: dict[str, Any], gather: bool, x_cast: str, w_cast: str, ids: list[str]) -> list[str]:
    """The direct form register-tiled (knob ``direct`` = ``tiled``; depthwise and thin
    groups, not the transposed gather): a program owns a BLOCK_H x BLOCK_W tile of one
    output plane (sample, channel, depth), so a tap's weight is one scalar load per
    program instead of a gather per lane, the tap's coordinates and bounds are a column
    and a row vector (broadcast, not per element), and the input reads run along W
    (``ids``: the line binding ``pid``, ``emit/grid.py``)."""
    s = e["s"] if gather else (1, 1, 1)
    lines = [
        *ids,
        "    tiles_w = tl.cdiv(OW, BLOCK_W)",
        "    tiles_h = tl.cdiv(OH, BLOCK_H)",
        "    tw = pid % tiles_w",
        "    t = pid // tiles_w",
        "    th = t % tiles_h",
        "    t = t // tiles_h",
        "    od = t % OD",
        "    nc = t // OD",
        "    c = nc % (G * COUT_G)",
        "    n = nc // (G * COUT_G)",
        "    g = c // COUT_G",
        "    oh = th * BLOCK_H + tl.arange(0, BLOCK_H)",
        "    ow = tw * BLOCK_W + tl.arange(0, BLOCK_W)",
        "    zero = tl.zeros([BLOCK_H, BLOCK_W], dtype=tl.int32)",
        "    mask = (oh[:, None] < OH) & (ow[None, :] < OW) & (nc * OD * OH * OW < n_out)",
        "    cols = c + zero",
        "    n_i = n + zero",
        "    od_i = od + zero",
        "    oh_i = oh[:, None] + zero",
        "    ow_i = ow[None, :] + zero",
        "    out_off = ((nc * OD + od) * OH + oh_i) * OW + ow_i",
        "    acc = tl.zeros([BLOCK_H, BLOCK_W], dtype=tl.float32)",
        "    for ci in range(0, CIN_G):",
        "        x_base = (n * (G * CIN_G) + g * CIN_G + ci) * D",
        "        w_base = (c * CIN_G + ci) * (KD * KH * KW)",
    ]
    return lines + _window(e, gather, s, ("od", "oh[:, None]", "ow[None, :]"), x_cast, ")" + w_cast)
