"""Model descriptions: parameters and stored bytes of real architectures, counted by hand.

The configs are written inline (the fields of each model's published `config.json` that matter),
so the tests need no files but the ones they write.
"""
import json

import pytest

from rooftop.llm.config import ConfigError, load_spec
from rooftop.llm.shapes import FORMATS, PRESETS
from rooftop.analysis.step_cost import model_summary, weight_bytes

LLAMA3_8B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
             "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
             "vocab_size": 128256, "tie_word_embeddings": False, "rope_theta": 500000.0, "rms_norm_eps": 1e-05,
             "torch_dtype": "bfloat16"}
QWEN25_7B = {"model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
             "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064, "tie_word_embeddings": False,
             "sliding_window": 131072, "use_sliding_window": False, "torch_dtype": "bfloat16"}
MIXTRAL = {"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
           "num_attention_heads": 32, "num_key_value_heads": 8, "num_local_experts": 8, "num_experts_per_tok": 2,
           "vocab_size": 32000, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
QWEN3_30B_A3B = {"model_type": "qwen3_moe", "hidden_size": 2048, "intermediate_size": 6144, "moe_intermediate_size": 768,
                 "num_hidden_layers": 48, "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
                 "num_experts": 128, "num_experts_per_tok": 8, "vocab_size": 151936, "tie_word_embeddings": False,
                 "torch_dtype": "bfloat16"}
GPT_OSS_20B = {"model_type": "gpt_oss", "hidden_size": 2880, "intermediate_size": 2880, "num_hidden_layers": 24,
               "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64, "num_local_experts": 32,
               "num_experts_per_tok": 4, "vocab_size": 201088, "tie_word_embeddings": False, "attention_bias": True,
               "sliding_window": 128, "torch_dtype": "bfloat16",
               "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": [
                   "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}}


def write(tmp_path, doc, name="config.json"):
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return str(p)


def test_llama3_8b_parameters(tmp_path):
    spec = load_spec(write(tmp_path, LLAMA3_8B))
    c = spec.config
    # per layer: q,k,v,o 4096·128·(2·32 + 2·8) = 41,943,040; MLP 3·4096·14336 = 176,160,768; norms 2·4096
    assert c.layer_params() == 41_943_040 + 176_160_768 + 8_192 == 218_112_000
    # + embedding and untied LM head 128256·4096 = 525,336,576 each, + final norm 4096
    assert c.params() == 32 * 218_112_000 + 2 * 525_336_576 + 4_096 == 8_030_261_248
    assert spec.base.name == "bf16" and spec.quantized is None and spec.kv_dtype == "bf16"
    assert c.params() == PRESETS["llama3-8b"].params()  # the preset and the config agree


def test_qwen2_biases_and_window_off(tmp_path):
    c = load_spec(write(tmp_path, QWEN25_7B)).config
    # q/k/v biases (28 + 2·4)·128 = 4608 per layer; the window applies only with use_sliding_window
    attn = 3584 * 128 * (2 * 28 + 2 * 4)
    layer = attn + 4_608 + 3 * 3584 * 18944 + 2 * 3584
    assert c.params() == 28 * layer + 2 * 152064 * 3584 + 3584 == 7_615_616_512  # "7.61B" on the model card
    assert c.sliding_window == 0


def test_tied_embeddings_read_once():
    c = PRESETS["llama3-1b"]
    spec = load_spec("llama3-1b")
    layers = 16 * c.layer_params()
    assert weight_bytes(spec, 1) == 2 * (layers + 2048 + 128256 * 2048)  # the one matrix, read as the LM head
    assert c.params() == layers + 128256 * 2048 + 2048


def test_moe_parameters(tmp_path):
    mix = load_spec(write(tmp_path, MIXTRAL, "m.json")).config
    attn = 4096 * 128 * 80 + 2 * 4096
    layer = attn + 4096 * 8 + 8 * 3 * 4096 * 14336  # + router + 8 experts
    assert mix.params() == 32 * layer + 2 * 32000 * 4096 + 4096 == 46_702_792_704  # "46.7B"
    assert mix.active_params() == 32 * (attn + 4096 * 8 + 2 * 3 * 4096 * 14336) + 4096 + 32000 * 4096
    q3 = load_spec(write(tmp_path, QWEN3_30B_A3B, "q.json")).config
    # head_dim 128 (not 2048/32), q/k norms 2·128, 128 experts of FFN 768, router 2048·128
    attn = 2048 * 128 * (2 * 32 + 2 * 4) + 2 * 128 + 2 * 2048
    layer = attn + 2048 * 128 + 128 * 3 * 2048 * 768
    assert q3.params() == 48 * layer + 2 * 151936 * 2048 + 2048 == 30_532_122_624  # "30.5B"
    assert q3.moe_layer_count == 48 and q3.dense_layer_count == 0


def test_first_dense_layers_and_shared_experts(tmp_path):
    doc = {**QWEN3_30B_A3B, "model_type": "qwen2_moe", "mlp_only_layers": [0, 1], "shared_expert_intermediate_size": 4096}
    c = load_spec(write(tmp_path, doc)).config
    assert c.dense_layers == (0, 1) and c.moe_layer_count == 46 and c.shared_ffn == 4096 and c.shared_gate
    dense = c.attn_matrix_params() + c.attn_small_params() + 3 * 2048 * 6144
    moe = c.attn_matrix_params() + c.attn_small_params() + 2048 * 128 + 128 * 3 * 2048 * 768 + 3 * 2048 * 4096 + 2048
    assert c.params() == 2 * dense + 46 * moe + 2 * 151936 * 2048 + 2048


def test_mxfp4_and_nvfp4_bytes_per_parameter():
    # MXFP4: 4-bit values + one 8-bit scale per 32 values = 4.25 bits
    assert FORMATS["mxfp4"].bits == 4 + 8 / 32 == 4.25
    assert FORMATS["mxfp4"].nbytes(32 * 1000) == 32 * 1000 * 4 / 8 + 1000
    # NVFP4: 4-bit values + one fp8 scale per 16 = 4.5 bits, plus one fp32 scale per tensor
    assert FORMATS["nvfp4"].bits == 4.5
    assert FORMATS["nvfp4"].nbytes(4096 * 4096, tensors=1) == 4096 * 4096 // 2 + 4096 * 4096 // 16 + 4 == 9_437_188


def test_gpt_oss_20b_bytes(tmp_path):
    spec = load_spec(write(tmp_path, GPT_OSS_20B))
    c = spec.config
    # per layer: attention 2880·(4096 + 2·512 + 4096) + biases (4096 + 2·512 + 2880) + 64 sinks + 2 norms
    attn_w = 2880 * (4096 + 512 + 512 + 4096)
    attn_small = 4096 + 512 + 512 + 2880 + 64 + 2 * 2880
    # 32 experts: gate_up 2880·5760 + bias 5760, down 2880·2880 + bias 2880; router 2880·32 + 32
    expert_w = 2880 * 5760 + 2880 * 2880
    expert_b = 5760 + 2880
    router = 2880 * 32 + 32
    layer = attn_w + attn_small + 32 * (expert_w + expert_b) + router
    total = 24 * layer + 2 * 201088 * 2880 + 2880
    assert c.params() == total == 20_914_757_184  # "21B"
    assert c.sliding_window == 128 and c.sliding_layers == tuple(range(0, 24, 2))
    # the expert matrices in MXFP4 (4.25 bits), everything else (attention, router, embeddings, LM head,
    # biases, norms) bf16, as modules_to_not_convert says
    assert spec.quantized.name == "mxfp4" and {"attn", "lm_head"} <= spec.unquantized
    mx = 24 * 32 * expert_w
    by_hand = mx * 4.25 / 8 + (total - mx) * 2
    assert by_hand == 13_761_264_768  # 13.8 GB, the size of the published checkpoint
    assert model_summary(spec)["weight_bytes"] == pytest.approx(by_hand, rel=1e-12)


def test_fp8_block_and_nvfp4_configs(tmp_path):
    fp8 = {**LLAMA3_8B, "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}
    spec = load_spec(write(tmp_path, fp8, "a.json"))
    assert spec.quantized.bits == 8 + 32 / 16384 and spec.precision("lm_head") is spec.base
    nv = {**LLAMA3_8B, "quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4",
                                               "exclude_modules": ["lm_head"]}}
    spec = load_spec(write(tmp_path, nv, "b.json"))
    assert spec.precision("attn").name == "nvfp4" and spec.precision("mlp").name == "nvfp4"
    assert spec.precision("lm_head").name == "bf16"
    c = spec.config
    # 4.5 bits per weight, 4 bytes per tensor (q, k, v, o, gate, up, down); norms bf16
    layer = c.attn_matrix_params() * 4.5 / 8 + 4 * 4 + 8192 * 2 + c.mlp_params(14336) * 4.5 / 8 + 3 * 4
    assert weight_bytes(spec, 1) == pytest.approx(32 * layer + 4096 * 2 + 128256 * 4096 * 2)


def test_weight_dtype_override(tmp_path):
    path = write(tmp_path, LLAMA3_8B)
    spec = load_spec(path, weight_dtype="nvfp4")
    assert spec.precision("mlp").name == "nvfp4" and spec.precision("lm_head").name == "bf16"
    assert spec.kv_dtype == "bf16"
    spec = load_spec(path, weight_dtype="fp32", kv_dtype="fp8")
    assert spec.quantized is None and spec.base.name == "fp32" and spec.kv_bytes == 1


@pytest.mark.parametrize("change,field", [
    ({"model_type": "deepseek_v3"}, "model_type"),
    ({"kv_lora_rank": 512}, "kv_lora_rank"),
    ({"layer_types": ["linear_attention"] * 32}, "layer_types"),
    ({"torch_dtype": None}, "torch_dtype"),
    ({"torch_dtype": "float6"}, "torch_dtype"),
    ({"num_attention_heads": "32"}, "num_attention_heads"),
    ({"hidden_size": None}, "hidden_size"),
    ({"quantization_config": {"quant_method": "gptq"}}, "quant_method"),
])
def test_unusable_config_is_one_line_naming_file_and_field(tmp_path, change, field):
    path = write(tmp_path, {**LLAMA3_8B, **change})
    with pytest.raises(ConfigError) as err:
        load_spec(path)
    msg = str(err.value)
    assert path in msg and field in msg and "\n" not in msg


def test_bad_files_and_names(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="bad.json: not JSON"):
        load_spec(str(bad))
    with pytest.raises(ConfigError, match="not a preset"):
        load_spec("no-such-model")
    with pytest.raises(ConfigError, match="no such file"):
        load_spec(str(tmp_path / "missing.json"))
    with pytest.raises(ConfigError, match="--ep 3 does not divide 8 experts"):
        load_spec(write(tmp_path, MIXTRAL), ep=3)
    with pytest.raises(ConfigError, match="no experts"):
        load_spec("llama3-8b", ep=2)


def test_multimodal_text_config(tmp_path):
    doc = {"model_type": "llava", "text_config": LLAMA3_8B, "vision_config": {"hidden_size": 1024}}
    spec = load_spec(write(tmp_path, doc))
    assert spec.config.params() == 8_030_261_248 and "vision tower is not counted" in spec.notes[0]


@pytest.mark.parametrize("doc", [LLAMA3_8B, QWEN25_7B, MIXTRAL, QWEN3_30B_A3B, GPT_OSS_20B])
def test_any_damaged_field_is_a_config_error_never_a_crash(tmp_path, doc):
    """Every field replaced by values of the wrong kind: a usable spec or a one-line ConfigError."""
    bad_values = [None, -1, 0, "x", 1.5, True, [], {}, [1, "a"], 10**12]
    path = tmp_path / "config.json"
    extra = ["layer_types", "mlp_only_layers", "text_config", "sliding_window", "use_sliding_window", "max_window_layers",
             "n_shared_experts", "first_k_dense_replace", "decoder_sparse_step", "shared_expert_intermediate_size",
             "quantization_config.weight_block_size", "quantization_config.modules_to_not_convert"]
    for field in list(doc) + extra:
        for value in bad_values + [[{}], ["sliding_attention"] * 24, [[1]] * 32]:
            broken = json.loads(json.dumps(doc))
            if field.startswith("quantization_config."):
                broken["quantization_config"] = {"quant_method": "fp8", field.split(".")[1]: value}
            else:
                broken[field] = value
            path.write_text(json.dumps(broken))
            try:
                spec = load_spec(str(path))
            except ConfigError as exc:
                assert "\n" not in str(exc) and str(path) in str(exc)
            else:
                assert spec.config.params() > 0
