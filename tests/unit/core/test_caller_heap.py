import gc

from tfrecorder.core.caller_heap import caller_objects_frozen, objects_frozen_during


class Node:
    def __init__(self):
        self.me = self  # a reference cycle: only the collector frees it


def _collected(node) -> bool:
    """Whether a collection of every generation would look at `node` (frozen objects are in none)."""
    return any(found is node for generation in range(3) for found in gc.get_objects(generation))


def test_the_callers_objects_are_frozen_within_and_given_back_after():
    before = Node()
    with caller_objects_frozen():
        assert gc.get_freeze_count() > 0 and not _collected(before)
        during = Node()
        assert _collected(during)  # the job's own objects are still collected
    assert gc.get_freeze_count() == 0 and _collected(before)


def test_a_caller_that_froze_objects_or_disabled_the_collector_is_left_alone():
    theirs = Node()
    gc.freeze()
    try:
        with caller_objects_frozen():
            mine = Node()
        assert not _collected(theirs) and _collected(mine)  # theirs stay frozen; nothing of the job's was
    finally:
        gc.unfreeze()
    gc.disable()
    try:
        with caller_objects_frozen():
            assert gc.get_freeze_count() == 0
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_callers_objects_are_given_back_when_the_block_raises():
    try:
        with caller_objects_frozen():
            raise RuntimeError("a failed job")
    except RuntimeError:
        pass
    assert gc.get_freeze_count() == 0


def test_a_block_inside_a_call_freezes_what_was_made_since_and_the_call_gives_all_back():
    """A job's call holds the freeze from its start (objects_frozen_during); its launch's block freezes the
    objects made meanwhile (the modules it imported) and the call, not the launch, unfreezes."""
    before = Node()

    @objects_frozen_during
    def call():
        made = Node()
        assert not _collected(before) and _collected(made)
        with caller_objects_frozen():
            assert not _collected(made)
        assert gc.get_freeze_count() > 0 and not _collected(made)  # still frozen: the call is not over
        return made

    made = call()
    assert gc.get_freeze_count() == 0 and _collected(before) and _collected(made)
