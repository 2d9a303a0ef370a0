"""Tiny random-weight hybrid models, made on this machine (no model hub is reached).

    python tiny_models.py <folder> <family>...

Each family becomes <folder>/<family>/ with config.json, random bf16 safetensors and a tokenizer built with
the `tokenizers` library: a word-level vocabulary of "w0".."w{n}" plus three special tokens, so any token id
the model emits decodes and re-encodes to itself. Runs where transformers and torch are importable (the vLLM
environment of the suite). A folder with a `.complete` file is kept as it is.
"""
import json
import pathlib
import sys

VOCAB = 256
SPECIAL = ["<pad>", "<s>", "</s>"]  # ids 0, 1, 2
HIDDEN = 128


def _common():
    # Attention pages as large as a small Mamba/GDN state: vLLM sizes its blocks so that the attention page
    # of a block is at least a Mamba state, and smaller blocks keep the prompts (2.5 blocks) short.
    return dict(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=4, num_attention_heads=4,
                num_key_value_heads=2, max_position_embeddings=2048, pad_token_id=0, bos_token_id=1,
                eos_token_id=2, tie_word_embeddings=False,
                # Weights five times the usual scale, so the layers' states, not the embedding of the last
                # token, decide the next one: a state copy gone wrong then changes the tokens.
                initializer_range=0.1)


def qwen3_next():
    """2 gated-delta-net (GDN) layers and 2 full-attention layers, a small MoE."""
    from transformers import Qwen3NextConfig, Qwen3NextForCausalLM

    config = Qwen3NextConfig(
        **_common(), intermediate_size=256, head_dim=128,
        layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"],
        linear_conv_kernel_dim=4, linear_key_head_dim=64, linear_value_head_dim=64, linear_num_key_heads=2,
        linear_num_value_heads=4, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64,
        shared_expert_intermediate_size=64, decoder_sparse_step=1)
    return config, Qwen3NextForCausalLM


def lfm2():
    """2 short-convolution layers and 2 full-attention layers. vLLM reads conv_dim and block_dim, which
    transformers' Lfm2Config does not define: they are set here as the model's hidden size."""
    from transformers import Lfm2Config, Lfm2ForCausalLM

    config = Lfm2Config(**_common(), intermediate_size=256, layer_types=["conv", "full_attention"] * 2,
                        conv_L_cache=3, block_auto_adjust_ff_dim=False)
    config.conv_dim = HIDDEN
    config.block_dim = HIDDEN
    config.block_ff_dim = 256
    return config, Lfm2ForCausalLM


def nemotron_h():
    """The Mamba2 family's representative: 2 Mamba2 layers, 1 attention layer, 1 MLP layer. vLLM's CPU build
    does not serve it in align mode (the suite checks that it still fails with the plugin off)."""
    from transformers import NemotronHConfig, NemotronHForCausalLM

    config = NemotronHConfig(**_common(), head_dim=32, intermediate_size=256,
                             layers_block_type=["mamba", "attention", "mamba", "mlp"], ssm_state_size=16,
                             mamba_num_heads=4, mamba_head_dim=64, n_groups=1, expand=2, conv_kernel=4,
                             chunk_size=64)
    return config, NemotronHForCausalLM


def jamba():
    """Jamba: 2 Mamba (v1) layers, 2 attention layers, no experts. Not served by vLLM's CPU build in align
    mode either (checked as for nemotron_h)."""
    from transformers import JambaConfig, JambaForCausalLM

    config = JambaConfig(**_common(), intermediate_size=256, num_experts=1, num_experts_per_tok=1,
                         attn_layer_period=2, attn_layer_offset=1, mamba_d_state=16, mamba_d_conv=4,
                         mamba_expand=2)
    return config, JambaForCausalLM


FAMILIES = {"qwen3_next": qwen3_next, "lfm2": lfm2, "nemotron_h": nemotron_h, "jamba": jamba}


def save_tokenizer(folder):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(SPECIAL)}
    vocab.update({f"w{i}": i for i in range(len(SPECIAL), VOCAB)})
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.decoder = decoders.WordPiece(prefix="##", cleanup=False)  # joins words with spaces
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="<pad>", bos_token="<s>",
                                   eos_token="</s>", unk_token="<pad>")
    fast.save_pretrained(folder)


def make(folder: pathlib.Path, family: str) -> pathlib.Path:
    import torch

    target = folder / family
    if (target / ".complete").exists():
        return target
    torch.manual_seed(0)
    config, model_class = FAMILIES[family]()
    config.torch_dtype = "bfloat16"  # vLLM's GDN kernel on CPU asserts bf16
    model = model_class(config).to(torch.bfloat16)
    model.save_pretrained(target)
    save_tokenizer(target)
    (target / ".complete").write_text(json.dumps({"family": family}) + "\n")
    return target


if __name__ == "__main__":
    for name in sys.argv[2:]:
        print(make(pathlib.Path(sys.argv[1]), name))
