from nbhelpers.diagnosis.redact import REDACTED, is_secret_name, redact_env, redact_text


def test_secret_names():
    for name in ["HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "WANDB_API_KEY", "DB_PASSWORD", "GOOGLE_CREDENTIALS", "KEY"]:
        assert is_secret_name(name), name
    for name in ["NCCL_DEBUG", "MASTER_ADDR", "TORCH_NCCL_BLOCKING_WAIT", "MONKEYS", "KEYBOARD_LAYOUT"]:
        assert not is_secret_name(name), name


def test_redact_env_values_and_url_credentials():
    env = redact_env({"HF_TOKEN": "hf_abc123", "HTTP_PROXY": "http://bob:hunter2@proxy:3128", "NCCL_DEBUG": "INFO"})
    assert env == {"HF_TOKEN": REDACTED, "HTTP_PROXY": f"http://{REDACTED}@proxy:3128", "NCCL_DEBUG": "INFO"}


def test_redact_text_removes_literal_secret_values():
    env = {"WANDB_API_KEY": "0123456789abcdef", "SHORT_KEY": "ab"}
    text = "export WANDB_API_KEY=0123456789abcdef; curl https://u:p4ss@host/x; ab stays"
    out = redact_text(text, env)
    assert "0123456789abcdef" not in out and "p4ss" not in out
    assert "ab stays" in out


def test_redact_text_secret_flags_assignments_and_escaped_forms():
    env = {"DB_PASSWORD": 'p<&>"ss-9f8e'}
    text = ("torchrun train.py --hf-token hf_live_77 --password=abc123 --lr 0.1 | HF_TOKEN=hf_env_55 "
            "NCCL_DEBUG=INFO | html p&lt;&amp;&gt;&quot;ss-9f8e | json p<&>\\\"ss-9f8e")
    out = redact_text(text, env)
    for secret in ("hf_live_77", "abc123", "hf_env_55", "ss-9f8e"):
        assert secret not in out, out
    assert "--lr 0.1" in out and "NCCL_DEBUG=INFO" in out and f"--hf-token {REDACTED}" in out
    assert redact_text(out, env) == out  # idempotent
    html_out = redact_text("x https://u:pw1234@h/ y", env, marker="&lt;redacted&gt;")
    assert "pw1234" not in html_out and "&lt;redacted&gt;@h" in html_out


def test_redact_obj_walks_nested_structures():
    from nbhelpers.diagnosis.redact import redact_obj

    obj = {"a": ["--token sekrit99", {"b": "https://u:pw@x/"}], "n": 3}
    assert redact_obj(obj, {}) == {"a": [f"--token {REDACTED}", {"b": f"https://{REDACTED}@x/"}], "n": 3}
