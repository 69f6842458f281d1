"""The model catalog: decoder-only transformers by shape, and what one layer costs.

Shapes as their papers publish them:
- GPT-3 175B: 96 layers, d_model 12288, 96 heads, context 2048 (Brown et al. 2020, Table 2.1);
  vocabulary 51,200 as Megatron-LM trains it (Narayanan et al. 2021, sec. 5.1).
- Llama 3 8B / 70B / 405B: layers 32 / 80 / 126, model dimension 4096 / 8192 / 16384,
  FFN dimension 14336 / 28672 / 53248, attention heads 32 / 64 / 128, 8 key/value heads,
  vocabulary 128,000 (Llama 3 Herd of Models, arXiv:2407.21783, Table 3); SwiGLU, no dropout,
  no biases; pre-training sequence 8,192.
- Mixtral 8x7B: dim 4096, 32 layers, head_dim 128, hidden_dim 14336, 32 heads, 8 key/value heads, vocabulary
  32,000, 8 experts, top-2 routing, context 32,768 (Jiang et al., "Mixtral of Experts", arXiv:2401.04088,
  Table 1); SwiGLU experts (sec. 2.1); about 47B parameters, 13B active per token.
"""

from __future__ import annotations

from dataclasses import dataclass

BF16 = 2  # bytes of a bf16 element: the weights, activations and gradients the models train in


@dataclass(frozen=True)
class Model:
    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn_hidden: int
    vocab: int
    seq_len: int
    gated_mlp: bool = False  # SwiGLU: three FFN matrices instead of two
    dropout: bool = True  # GPT-style dropout after attention and MLP (a memory-bound pass each)
    flash_attention: bool = True  # fused attention: no s×s scores in memory
    experts: int = 0  # mixture of experts: FFN experts per layer (0: dense)
    top_k: int = 1

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def layer_params(self) -> float:
        """Weights of one layer: attention Q, K, V, O and the (expert) FFN; biases and norms aside."""
        attn = self.hidden * (self.hidden + 2 * self.kv_heads * self.head_dim) + self.hidden * self.hidden
        ffn = (3 if self.gated_mlp else 2) * self.hidden * self.ffn_hidden
        return attn + ffn * max(1, self.experts) + 4 * self.hidden

    def params(self) -> float:
        """Ψ: the layers, and input and output embeddings (untied, as Llama 3 and Megatron-LM's
        pipeline-parallel GPT keep one copy on the first and one on the last stage)."""
        return self.layers * self.layer_params() + 2 * self.vocab * self.hidden

    def layer_forward_flops(self, tokens: float, context: float | None = None) -> dict[str, float]:
        """Forward FLOPs of one layer for `tokens` tokens attending to `context` keys (2 per multiply-add).

        matmuls: Q, K, V, O and the FFN (the activated experts only);
        attention: Q·Kᵀ and scores·V over the full context, 4·tokens·context·h, counted whole as
        Narayanan et al. (eq. 2) and Korthikanti et al. (appendix A) count it.
        """
        context = self.seq_len if context is None else context
        h = self.hidden
        qkv = 2 * tokens * h * (h + 2 * self.kv_heads * self.head_dim)
        out = 2 * tokens * h * h
        ffn = 2 * tokens * h * self.ffn_hidden * (3 if self.gated_mlp else 2) * (self.top_k if self.experts else 1)
        return {"qkv": qkv, "out": out, "ffn": ffn, "attention": 4 * tokens * context * h}

    def layer_matmuls(self, tp: int = 1) -> list[tuple[str, float, float, int]]:
        """One layer's linear layers in the order its forward calls them, as (name, n, k, copies): a token's row of
        k inputs times a k × n weight (this TP rank's share), `copies` the routed experts a token visits. The order
        is a Llama block's as torchtitan writes it (torchtitan/models/llama3/model.py: wq, wk, wv in Attention, wo;
        FeedForward's w2(silu(w1(x)) * w3(x)) calls w1, then w3, then w2): what torchtitan's per-op activation
        checkpointing counts to pick every second matmul (Layout.recompute "op")."""
        h, t = self.hidden, tp
        kv = self.kv_heads * self.head_dim
        e = self.top_k if self.experts else 1
        up = [("w1", self.ffn_hidden / t, h, e)] + ([("w3", self.ffn_hidden / t, h, e)] if self.gated_mlp else [])
        return [("wq", self.heads * self.head_dim / t, h, 1), ("wk", kv / t, h, 1), ("wv", kv / t, h, 1),
                ("wo", h, self.heads * self.head_dim / t, 1), *up, ("w2", h, self.ffn_hidden / t, e)]

    def op_recomputed_matmuls(self, tp: int = 1) -> list[tuple[str, float, float, int]]:
        """The matmuls torchtitan's per-op selective checkpointing replays in backward: every second one a layer calls
        (torchtitan/distributed/activation_checkpoint.py, the op policy: "Save all compute/comm ops, except every second
        mm/linear"; attention's output and the other matmuls' outputs are kept, every element-wise op replayed)."""
        return self.layer_matmuls(tp)[1::2]

    def logits_forward_flops(self, tokens: float) -> float:
        return 2 * tokens * self.hidden * self.vocab

    def model_flops(self, tokens: float) -> float:
        """Model FLOPs of a training step on `tokens` tokens: 3 × forward (backward is twice the
        forward), no recomputation counted (Korthikanti et al., "model FLOPs")."""
        per_layer = sum(self.layer_forward_flops(tokens).values())
        return 3 * (self.layers * per_layer + self.logits_forward_flops(tokens))


MODELS: dict[str, Model] = {
    "gpt3-175b": Model("gpt3-175b", layers=96, hidden=12288, heads=96, kv_heads=96, ffn_hidden=4 * 12288,
                       vocab=51200, seq_len=2048, flash_attention=False),
    "llama3-8b": Model("llama3-8b", layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336,
                       vocab=128000, seq_len=8192, gated_mlp=True, dropout=False),
    "llama3-70b": Model("llama3-70b", layers=80, hidden=8192, heads=64, kv_heads=8, ffn_hidden=28672,
                        vocab=128000, seq_len=8192, gated_mlp=True, dropout=False),
    "llama3-405b": Model("llama3-405b", layers=126, hidden=16384, heads=128, kv_heads=8, ffn_hidden=53248,
                         vocab=128000, seq_len=8192, gated_mlp=True, dropout=False),
    "mixtral-8x7b": Model("mixtral-8x7b", layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336,
                          vocab=32000, seq_len=32768, gated_mlp=True, dropout=False, experts=8, top_k=2),
}

# What screens call each preset (the layout chooser, the cluster control, the projected view: static/js/presets.js
# reads them from the page, app/content/markup.estimator_presets)
TITLES: dict[str, str] = {"gpt3-175b": "GPT-3 175B", "llama3-8b": "Llama 3 8B", "llama3-70b": "Llama 3 70B",
                          "llama3-405b": "Llama 3 405B", "mixtral-8x7b": "Mixtral 8x7B"}


def gpt(layers: int, hidden: int, heads: int, seq_len: int = 2048, vocab: int = 51200, name: str = "gpt",
        flash_attention: bool = False) -> Model:
    """A Megatron-LM GPT shape: MHA, FFN 4h with GeLU, dropout (Narayanan et al. 2021, sec. 5.1)."""
    return Model(name, layers=layers, hidden=hidden, heads=heads, kv_heads=heads, ffn_hidden=4 * hidden,
                 vocab=vocab, seq_len=seq_len, flash_attention=flash_attention)
