"""The harness registry: every wrapper dh knows, by name and alias."""

from ..errors import UnknownHarness
from .base import Wrapper
from .claude import ClaudeWrapper
from .codex import CodexWrapper
from .opencode import OpenCodeWrapper
from .pi import PiWrapper

REGISTRY: dict[str, Wrapper] = {}


def register(wrapper: Wrapper) -> None:
    REGISTRY[wrapper.name] = wrapper


for _wrapper in (ClaudeWrapper(), CodexWrapper(), OpenCodeWrapper(), PiWrapper()):
    register(_wrapper)


def names() -> list[str]:
    return sorted(REGISTRY)


def get(name: str) -> Wrapper:
    for wrapper in REGISTRY.values():
        if name == wrapper.name or name in wrapper.aliases:
            return wrapper
    if name == "dh-demo":  # `dh demo`'s own harness: never listed, but a kept demo log stays readable
        from .demo import DemoWrapper

        return DemoWrapper()
    raise UnknownHarness(f"unknown harness {name!r}; available: claude-code (claude), codex, opencode, pi")
