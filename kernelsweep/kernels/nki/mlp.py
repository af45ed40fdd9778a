"""Gated MLP: out = (silu(x @ Wg) * (x @ Wu)) @ Wd, one chunk of at most 128 tokens at a time.

The activations are produced transposed ([i, tokens]) so that they feed the down projection as the
stationary operand without another transpose; x^T and act^T are Python lists of tiles, one per 128
rows of h and of i. Edge tiles are simply smaller. At LNC=2 the token chunks are dealt out to the two
cores in turn, and a single chunk is first halved so that both cores have work.
"""

import nki
import nki.isa as nisa
import nki.language as nl

P = 128  # partition tile: contraction tiles and the stationary free size
FREE = 512  # moving free size: one PSUM bank of fp32


@nki.jit
def mlp_kernel(hidden_tensor, gate_proj_weights_tensor, up_proj_weights_tensor, down_proj_weights_tensor):
    b, s, h = hidden_tensor.shape
    i = gate_proj_weights_tensor.shape[1]
    tokens = b * s
    dtype = hidden_tensor.dtype
    x = hidden_tensor.reshape((tokens, h))
    out = nl.ndarray((b, s, h), dtype=dtype, buffer=nl.shared_hbm)
    out_rows = out.reshape((tokens, h))
    programs = nl.num_programs(0)
    chunk = min(P, -(-tokens // programs))
    for c in range(nl.program_id(0), -(-tokens // chunk), programs):
        t0 = c * chunk
        t = min(chunk, tokens - t0)
        x_t = []  # x^T [h, t], one tile per 128 rows of h: loaded row-major, transposed on the TensorE
        for h0 in range(0, h, P):
            hk = min(P, h - h0)
            rows = nl.ndarray((t, hk), dtype=dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=rows, src=x[t0 : t0 + t, h0 : h0 + hk])
            flipped = nl.ndarray((hk, t), dtype=dtype, buffer=nl.psum)
            nisa.nc_transpose(dst=flipped, data=rows)
            x_tile = nl.ndarray((hk, t), dtype=dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=x_tile, src=flipped)
            x_t.append(x_tile)
        act_t = []  # act^T [i, t] = silu(Wg^T x^T) * (Wu^T x^T), one tile per 128 rows of i
        for i0 in range(0, i, P):
            ik = min(P, i - i0)
            gate = nl.ndarray((ik, t), dtype=nl.float32, buffer=nl.psum)
            up = nl.ndarray((ik, t), dtype=nl.float32, buffer=nl.psum)
            for kh in range(len(x_t)):
                h0 = kh * P
                hk = min(P, h - h0)
                wg = nl.ndarray((hk, ik), dtype=gate_proj_weights_tensor.dtype, buffer=nl.sbuf)
                wu = nl.ndarray((hk, ik), dtype=up_proj_weights_tensor.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=wg, src=gate_proj_weights_tensor[h0 : h0 + hk, i0 : i0 + ik])
                nisa.dma_copy(dst=wu, src=up_proj_weights_tensor[h0 : h0 + hk, i0 : i0 + ik])
                nisa.nc_matmul(dst=gate, stationary=wg, moving=x_t[kh])
                nisa.nc_matmul(dst=up, stationary=wu, moving=x_t[kh])
            silu = nl.ndarray((ik, t), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=silu, op=nl.silu, data=gate)
            act = nl.ndarray((ik, t), dtype=dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=act, data1=silu, data2=up, op=nl.multiply)
            act_t.append(act)
        for n0 in range(0, h, FREE):  # out rows [t, hn] = act @ Wd, accumulated over i
            hn = min(FREE, h - n0)
            acc = nl.ndarray((t, hn), dtype=nl.float32, buffer=nl.psum)
            for ki in range(len(act_t)):
                i0 = ki * P
                ik = min(P, i - i0)
                wd = nl.ndarray((ik, hn), dtype=down_proj_weights_tensor.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=wd, src=down_proj_weights_tensor[i0 : i0 + ik, n0 : n0 + hn])
                nisa.nc_matmul(dst=acc, stationary=act_t[ki], moving=wd)
            result = nl.ndarray((t, hn), dtype=dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=result, src=acc)
            nisa.dma_copy(dst=out_rows[t0 : t0 + t, n0 : n0 + hn], src=result)
    return out
