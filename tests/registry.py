"""The tests' registry (``core.registry``; listed by ``config/settings_test.py``): the
pipelines, tools, environments, graders and oracles the tests name."""

from tests.core.test_logs import logged
from tests.evals.agent_tools import (
    boom,
    declared,
    documented,
    environment,
    huge,
    issue_refund,
    lookup_order,
    mock_shop,
    not_json,
    slow,
    slow_async,
)
from tests.evals.test_cost_precision import tiny_pipeline
from tests.evals.test_targets_callable import (
    cached_pipeline,
    explode,
    leave,
    negative_cache,
    negative_tokens,
    priced_agent,
    shout,
    shout_async,
    wrong_shape,
)
from tests.evals.test_targets_callable import slow as slow_pipeline
from tests.evals.test_trajectory_steps import _agent, _bad_agent
from tests.flows.agent_hostile_tools import environment as hostile_environment
from tests.flows.agent_hostile_tools import finish, hostile_agent
from tests.flows.agent_hostile_tools import huge as hostile_huge
from tests.flows.test_hostile_text import hostile_pipeline
from tests.grader_oracles import (
    as_dict,
    as_result,
    contract_fixture,
    exits,
    item_oracle_none,
    nan_score,
    raises,
    refund_within_limit,
    returns_none,
)
from tests.providers.shop_tools import find_order, refund_order, shop

__all__ = [
    "_agent",
    "_bad_agent",
    "as_dict",
    "as_result",
    "boom",
    "cached_pipeline",
    "contract_fixture",
    "declared",
    "documented",
    "environment",
    "exits",
    "explode",
    "find_order",
    "finish",
    "hostile_agent",
    "hostile_environment",
    "hostile_huge",
    "hostile_pipeline",
    "huge",
    "issue_refund",
    "item_oracle_none",
    "leave",
    "logged",
    "lookup_order",
    "mock_shop",
    "nan_score",
    "negative_cache",
    "negative_tokens",
    "priced_agent",
    "not_json",
    "raises",
    "refund_order",
    "refund_within_limit",
    "returns_none",
    "shop",
    "shout",
    "shout_async",
    "slow",
    "slow_async",
    "slow_pipeline",
    "tiny_pipeline",
    "wrong_shape",
]
