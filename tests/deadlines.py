"""A deadline for tests that count the checks of a computation (issue 24: a loop that drops
its deadline is caught by the count, which an already-expired deadline would miss)."""

from rheo.reference.deadline import Deadline


class CountingDeadline(Deadline):
    """Never expires; counts every check (``checks``) and the checks per place (``checked``,
    by the ``what`` each loop names), and otherwise records counts and shares as a Deadline."""

    def __init__(self) -> None:
        super().__init__(None)
        self.checks = 0
        self.checked: dict[str, int] = {}

    def check(self, count=None, what="joint draws", share=None):
        self.checks += 1
        self.checked[what] = self.checked.get(what, 0) + 1
        super().check(count, what, share)
