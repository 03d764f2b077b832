"""Plain PyTorch solutions (also used for references and baselines)."""

from solbench.evaluate.languages.base import Language


class PyTorch(Language):
    name = "pytorch"
    proof = True  # nothing to prove: any PyTorch code is PyTorch

    def proven_on(self, device: str) -> bool:
        return True
