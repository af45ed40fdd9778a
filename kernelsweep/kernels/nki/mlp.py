"""Gated MLP: out = (silu(x @ Wg) * (x @ Wu)) @ Wd, one 128-token tile of x at a time.

The activations are produced transposed ([i, tokens]) so they can feed the down projection as the
stationary operand without an extra transpose.
"""

import nki
import nki.language as nl

P = 128  # partition tile
FREE = 512  # moving free-size tile


@nki.jit
def mlp_kernel(hidden_tensor, gate_proj_weights_tensor, up_proj_weights_tensor, down_proj_weights_tensor):
    b, s, h = hidden_tensor.shape
    i = gate_proj_weights_tensor.shape[1]
    tokens = b * s
    x = hidden_tensor.reshape((tokens, h))
    out = nl.ndarray((b, s, h), dtype=hidden_tensor.dtype, buffer=nl.shared_hbm)
    out2 = out.reshape((tokens, h))
    for t in nl.affine_range(tokens // P):
        rows = nl.ds(t * P, P)
        x_t = nl.ndarray((h // P, nl.par_dim(P), P), dtype=x.dtype, buffer=nl.sbuf)  # x^T tiles [h, tokens]
        for kh in nl.affine_range(h // P):
            x_t[kh] = nl.transpose(nl.load(x[rows, nl.ds(kh * P, P)]))
        act_t = nl.ndarray((i // P, nl.par_dim(P), P), dtype=x.dtype, buffer=nl.sbuf)  # act^T [i, tokens]
        for ki in nl.affine_range(i // P):
            gate = nl.zeros((P, P), nl.float32, buffer=nl.psum)
            up = nl.zeros((P, P), nl.float32, buffer=nl.psum)
            for kh in nl.affine_range(h // P):
                cols = nl.ds(ki * P, P)
                wg = nl.load(gate_proj_weights_tensor[nl.ds(kh * P, P), cols])
                wu = nl.load(up_proj_weights_tensor[nl.ds(kh * P, P), cols])
                gate += nl.matmul(wg, x_t[kh], transpose_x=True)  # (Wg^T x^T) = (x Wg)^T
                up += nl.matmul(wu, x_t[kh], transpose_x=True)
            act_t[ki] = nl.multiply(nl.silu(gate), up, dtype=x.dtype)
        for nh in nl.affine_range(h // min(h, FREE)):
            width = min(h, FREE)
            acc = nl.zeros((P, width), nl.float32, buffer=nl.psum)
            for ki in nl.affine_range(i // P):
                wd = nl.load(down_proj_weights_tensor[nl.ds(ki * P, P), nl.ds(nh * width, width)])
                acc += nl.matmul(act_t[ki], wd, transpose_x=True)
            nl.store(out2[rows, nl.ds(nh * width, width)], value=nl.copy(acc, dtype=out.dtype))
    return out
