import torch


def run(grad_out, x, weight, eps):
    # the statistics the forward would have saved, then ATen's fused LayerNorm backward (fp32 throughout,
    # so grad_weight and grad_bias come out in fp32 on every device)
    hidden = x.shape[-1]
    xf = x.float()
    var, mean = torch.var_mean(xf, dim=-1, keepdim=True, correction=0)
    rstd = torch.rsqrt(var + eps)
    wf = weight.float()
    # the bias's values are not used; a defined tensor asks for grad_bias
    gx, gw, gb = torch.ops.aten.native_layer_norm_backward(
        grad_out.float(), xf, [hidden], mean, rstd, wf, torch.empty_like(wf), [True, True, True])
    return gx.to(x.dtype), gw, gb
