"""The one lifetime idiom of vk-adam's objects that hold Vulkan resources (optimizers, ZeRO-1
optimizers, runtimes): ``close()`` frees them, after which every call is refused with a clear
error; ``with`` closes them."""

from __future__ import annotations

from typing import NoReturn, TypeVar

from ._errors import OptimizerClosedError

_C = TypeVar("_C", bound="Closable")


class Closable:
    """:meth:`close` frees the object, then every call is refused (:meth:`_check_open` raises
    ``_closed_error(_closed_message)``). Subclasses set ``_closed = False`` once made."""

    _closed: bool = True
    _closed_error: type[Exception] = OptimizerClosedError
    _closed_message: str = "this optimizer was closed; create a new one"

    def close(self) -> None:
        raise NotImplementedError

    def _check_open(self) -> None:
        if self._closed:
            self._refuse_closed()

    def _refuse_closed(self) -> NoReturn:
        """Raise ``_closed_error(_closed_message)``. A hot path (a step) tests ``_closed`` itself
        and calls this only once closed: one attribute read per call instead of a call."""
        raise self._closed_error(self._closed_message)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran; a closed object refuses every call."""
        return self._closed

    def __enter__(self: _C) -> _C:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["Closable"]
