from rooftop.trace.redact import REDACTED, redact, redact_names, redact_text, secret_key

HF = "hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ012345"
GH = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
AWS = "AKIA" + "IOSFODNN7EXAMPLE"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"


def test_secret_keys_whole_value():
    doc = {"HF_TOKEN": "whatever", "aws_secret_access_key": "x", "Password": "p", "api_key": "k",
           "AUTHORIZATION": "Bearer abc", "credentials": {"user": "me", "pw": "y"}, "private_key": ["a"]}
    out = redact(doc)
    assert all(v == REDACTED for v in out.values())


def test_counts_and_lookalike_keys_survive():
    doc = {"max_tokens": 128, "new_tokens": 4, "tokenizer": "meta-llama/Llama-3-8B", "author": "me",
           "num_tokens": "12", "auth_enabled": True}
    assert redact(doc) == doc


def test_token_shapes_inside_strings():
    for tok in (HF, GH, AWS, JWT, "sk-ant-" + "api03-" + "x" * 30, "sk-" + "Z" * 40, "xoxb-" + "1234567890-abcdef",
                "github_pat_" + "11ABCDEFG" + "x" * 30, "gho_" + "y" * 36):
        text = f"python serve.py --model m {tok} --port 8000"
        out = redact_text(text)
        assert tok not in out and REDACTED in out, tok
        assert out.startswith("python serve.py --model m ") and out.endswith(" --port 8000")


def test_flags_and_env_assignments():
    assert redact_text("run --token abc123 --max-tokens 128") == f"run --token {REDACTED} --max-tokens 128"
    assert redact_text("HF_TOKEN=abc123 python x.py") == f"HF_TOKEN={REDACTED} python x.py"
    assert redact_text("--api-key=zzz --tokenizer llama") == f"--api-key={REDACTED} --tokenizer llama"


def test_recursive_lists_and_tuples():
    doc = {"env": [f"HF_TOKEN={HF}", "PATH=/usr/bin"], "nested": {"cmd": ("a", f"--hf-token {HF}")}}
    out = redact(doc)
    assert HF not in repr(out)
    assert out["env"][1] == "PATH=/usr/bin"
    assert isinstance(out["nested"]["cmd"], tuple)


def test_names_keep_ordinary_kernels_and_non_strings():
    names = ["void at::native::vectorized_elementwise_kernel<4>(int)", None, float("nan"),
             f"step/{HF}/layer=1", "token budget"]
    out = redact_names(names)
    assert out[0] == names[0] and out[1] is None and out[2] is names[2] and out[4] == "token budget"
    assert out[3] == f"step/{REDACTED}/layer=1"


def test_secret_key_predicate():
    assert secret_key("HUGGING_FACE_HUB_TOKEN") and secret_key("db_passwd") and secret_key("ACCESS_KEY")
    assert not secret_key("tokenizer_name") and not secret_key("max_tokens") and not secret_key("authors")
