from nbhelpers.redact import REDACTED, is_secret_name, redact_env, redact_text


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
