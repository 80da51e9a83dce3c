"""Kernel bodies of the convnd family (``kernel_convnd.py``): the lines between a
kernel's signature and its epilogue, for the implicit GEMM, the direct form and the
per-phase GEMM of transposed convolution. Each body ends with the names the epilogue
reads: ``acc``, ``mask``, ``cols`` (output channel), ``n_i`` / ``od_i`` / ``oh_i`` /
``ow_i`` (output coordinates) and ``out_off`` (NCDHW offset)."""

from __future__ import annotations

from typing import Any


def body_gemm(e: dict[str, Any], gather: bool, x_cast: str, w_cast: str, precision: str,
                      note: list[str], ids: list[str]) -> list[str]:
    sd, sh, sw = e["s"] if gather else (1, 1, 1)
    dd, dh, dw = e["d"]
    lines = [
        *ids,  # pid_m, pid_n, g (the kernel's program ids, emit/grid.py)
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
        "    for k0 in range(0, K, BLOCK_K):",
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
    lines += [f"        b = tl.load(w_ptr + w_off, mask=b_mask, other=0.0){w_cast}",
              *("        " + line for line in note),
              f'        acc += tl.dot(a, b, input_precision="{precision}")',
              "    mask = (rm[:, None] < M) & (rn[None, :] < COUT_G)",
              "    cols = co[None, :]",
              "    n_i = n_idx[:, None]",
              "    od_i = od[:, None]",
              "    oh_i = oh[:, None]",
              "    ow_i = ow[:, None]",
              "    out_off = (n_i * (G * COUT_G) + cols) * (OD * OH * OW) + (od_i * OH + oh_i) * OW + ow_i"]
    return lines


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
    """The phase form: transposed, GEMM form, dilation 1 (tap k of output o is valid iff
    k = (o + pad) % stride + j * stride)."""
    return bool(e["transposed"]) and form == "gemm" and tuple(e["d"]) == (1, 1, 1)


def body_phase(e: dict[str, Any], x_cast: str, w_cast: str, precision: str, note: list[str],
               ids: list[str]) -> list[str]:
    """Transposed conv as one implicit GEMM per output phase r = (o + pad) % stride: the
    outputs o = r - pad + stride * b of a phase all use taps k = r + j * stride, reading
    input b - j, so the reduction walks only valid taps (1 / stride^nd of the gather's)."""
    sd, sh, sw = e["s"]
    lines = [
        *ids,  # pid_m, pid_n, pid_z (the kernel's program ids, emit/grid.py)
        f"    g = pid_z // {sd * sh * sw}",
        f"    ph = pid_z % {sd * sh * sw}",
        f"    r_w = ph % {sw}",
        f"    r_h = (ph // {sw}) % {sh}",
        f"    r_d = ph // {sw * sh}",
    ]
    for c, sc, size in zip("dhw", (sd, sh, sw), ("OD", "OH", "OW"), strict=True):
        pad = f"P{c.upper()}"
        k = f"K{c.upper()}"
        # b of the phase's outputs: from ceil((pad - r) / s) (numerator > -s) to
        # floor((O - 1 - r + pad) / s), written with non-negative numerators (integer
        # division truncates); taps per output: ceil((K - r) / s)
        lines += [f"    b0_{c} = ({pad} - r_{c} + {sc - 1}) // {sc}",
                  f"    nb_{c} = tl.maximum(({size} - 1 - r_{c} + {pad} + {sc}) // {sc} - 1 - b0_{c} + 1, 0)",
                  f"    j_{c} = ({k} - r_{c} + {sc - 1}) // {sc}"]
    lines += [
        "    rows = nb_d * nb_h * nb_w",
        "    M = NB * rows",
        "    JV = tl.maximum(j_d * j_h * j_w, 1)",
        "    K = CIN_G * j_d * j_h * j_w",
        "    KV = KD * KH * KW",
        "    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)",
        "    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)",
        "    n_idx = rm // tl.maximum(rows, 1)",
        "    b_d = b0_d + (rm // tl.maximum(nb_h * nb_w, 1)) % tl.maximum(nb_d, 1)",
        "    b_h = b0_h + (rm // tl.maximum(nb_w, 1)) % tl.maximum(nb_h, 1)",
        "    b_w = b0_w + rm % tl.maximum(nb_w, 1)",
        "    co = g * COUT_G + rn",
        "    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)",
        "    for k0 in range(0, K, BLOCK_K):",
        "        rk = k0 + tl.arange(0, BLOCK_K)",
        "        ci = rk // JV",
        "        jr = rk % JV",
        "        jd = jr // tl.maximum(j_h * j_w, 1)",
        "        jh = (jr // tl.maximum(j_w, 1)) % tl.maximum(j_h, 1)",
        "        jw = jr % tl.maximum(j_w, 1)",
        "        i_d = b_d[:, None] - jd[None, :]",
        "        i_h = b_h[:, None] - jh[None, :]",
        "        i_w = b_w[:, None] - jw[None, :]",
        "        ok = (rm[:, None] < M) & (rk[None, :] < K) & (i_d >= 0) & (i_d < D) & (i_h >= 0) & (i_h < H)",
        "        ok = ok & (i_w >= 0) & (i_w < W)",
        "        cin = g * CIN_G + ci[None, :]",
        "        a = tl.load(x_ptr + (((n_idx[:, None] * (G * CIN_G) + cin) * D + i_d) * H + i_h) * W + i_w,",
        f"                    mask=ok, other=0.0){x_cast}",
        f"        kr = ((r_d + jd * {sd}) * KH + r_h + jh * {sh}) * KW + r_w + jw * {sw}",
        "        w_off = ((g * CIN_G + ci[:, None]) * COUT_G + rn[None, :]) * KV + kr[:, None]",
        "        b = tl.load(w_ptr + w_off, mask=(rk[:, None] < K) & (rn[None, :] < COUT_G), other=0.0)"
        f"{w_cast}",
        *("        " + line for line in note),
        f'        acc += tl.dot(a, b, input_precision="{precision}")',
        "    mask = (rm[:, None] < M) & (rn[None, :] < COUT_G)",
        "    cols = co[None, :]",
        "    n_i = n_idx[:, None]",
        "    od_i = (r_d - PD + b_d * " + str(sd) + ")[:, None]",
        "    oh_i = (r_h - PH + b_h * " + str(sh) + ")[:, None]",
        "    ow_i = (r_w - PW + b_w * " + str(sw) + ")[:, None]",
        "    out_off = (n_i * (G * COUT_G) + cols) * (OD * OH * OW) + (od_i * OH + oh_i) * OW + ow_i",
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
        "        for kd in tl.static_range(KD):",
        "            for kh in tl.static_range(KH):",
        "                for kw in tl.static_range(KW):",
        "                    ok = mask",
    ]
    lines += _taps(e, gather, "                    ", ("od_i", "oh_i", "ow_i"), ("kd", "kh", "kw"), s, e["d"])
    lines += ["                    xv = tl.load(x_ptr + ((x_base + i_d) * H + i_h) * W + i_w, mask=ok, "
              f"other=0.0){x_cast}",
              "                    wv = tl.load(w_ptr + w_base + (kd * KH + kh) * KW + kw, mask=mask, "
              f"other=0.0){w_cast}",
              "                    acc += xv * wv"]
    return lines
