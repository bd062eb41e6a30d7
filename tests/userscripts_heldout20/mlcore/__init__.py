"""mlcore: event-driven training primitives used by the ranking / audio / sequence teams."""
from .world import World, is_primary, rank_zero_only, world_session  # noqa: F401
