"""The writes that take a namespace from what it holds to what is wanted: only the
difference, counted as inserts, modifies and deletes, in an order that never leaves a route
without its gateway's neighbour."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network

from controller.southbound.linux.diff import burst_from_ticks, plan_changes, same_shaper
from controller.southbound.linux.state import KernelRoute, KernelState, Neighbour, NextHop
from hostenv.tbf import TbfParameters, tbf_parameters

GW1, GW2 = IPv4Address("169.254.1.1"), IPv4Address("169.254.1.2")
NET_A, NET_B = IPv4Network("10.0.2.0/24"), IPv4Network("10.0.3.0/24")
V6 = IPv6Network("fd00:0:2::/64")


def route(prefix, *hops: tuple[int, IPv4Address | IPv6Address]) -> KernelRoute:
    return KernelRoute(prefix, tuple(NextHop(port, gateway) for port, gateway in hops))


def neighbour(port: int, address, mac: str = "02:00:00:00:00:01") -> Neighbour:
    return Neighbour(port, address, mac)


def state(routes=(), neighbours=(), shapers=None) -> KernelState:
    return KernelState({r.prefix: r for r in routes}, {n.key: n for n in neighbours}, shapers or {})


def test_identical_states_need_no_write() -> None:
    held = state([route(NET_A, (1, GW1), (2, GW2))], [neighbour(1, GW1), neighbour(2, GW2)])
    plan = plan_changes(held, held)
    assert plan.empty
    assert (plan.inserts, plan.modifies, plan.deletes) == (0, 0, 0)


def test_everything_new_is_an_insert() -> None:
    wanted = state([route(NET_A, (1, GW1))], [neighbour(1, GW1)], {1: tbf_parameters(100, 10)})
    plan = plan_changes(wanted, state())
    assert (plan.inserts, plan.modifies, plan.deletes) == (3, 0, 0)
    assert plan.set_neighbours == (neighbour(1, GW1),)
    assert plan.set_routes == (route(NET_A, (1, GW1)),)
    assert plan.shaper_changes == 1


def test_a_route_losing_a_next_hop_is_one_modify() -> None:
    held = state([route(NET_A, (1, GW1), (2, GW2)), route(NET_B, (1, GW1))])
    wanted = state([route(NET_A, (1, GW1)), route(NET_B, (1, GW1))])
    plan = plan_changes(wanted, held)
    assert (plan.inserts, plan.modifies, plan.deletes) == (0, 1, 0)
    assert plan.set_routes == (route(NET_A, (1, GW1)),)


def test_what_is_no_longer_wanted_is_deleted_routes_before_neighbours() -> None:
    held = state(
        [route(NET_A, (2, GW2)), route(V6, (2, IPv6Address("fe80::1")))], [neighbour(2, GW2)]
    )
    plan = plan_changes(state(), held)
    assert plan.deletes == 3
    assert {r.prefix for r in plan.delete_routes} == {NET_A, V6}
    assert plan.delete_neighbours == (neighbour(2, GW2),)


def test_a_neighbour_whose_mac_changed_is_a_modify() -> None:
    held = state(neighbours=[neighbour(1, GW1, "02:00:00:00:00:01")])
    wanted = state(neighbours=[neighbour(1, GW1, "02:00:00:00:00:09")])
    plan = plan_changes(wanted, held)
    assert (plan.modifies, plan.set_neighbours) == (1, (neighbour(1, GW1, "02:00:00:00:00:09"),))


def test_a_shaper_read_back_a_byte_off_is_the_same_shaper() -> None:
    wanted = tbf_parameters(1000, 64)
    held = TbfParameters(wanted.rate_bits_per_s, wanted.burst_bytes - 1, wanted.limit_bytes)
    assert same_shaper(wanted, held)
    assert plan_changes(state(shapers={3: wanted}), state(shapers={3: held})).empty


def test_a_shaper_with_another_rate_or_limit_is_rewritten() -> None:
    wanted = tbf_parameters(1000, 64)
    slower = tbf_parameters(500, 64)
    shallower = tbf_parameters(1000, 8)
    assert not same_shaper(wanted, slower)
    assert not same_shaper(wanted, shallower)
    plan = plan_changes(state(shapers={3: wanted}), state(shapers={3: slower, 4: shallower}))
    assert plan.set_shapers == ((3, wanted),)
    assert plan.delete_shapers == (4,)
    assert (plan.modifies, plan.deletes, plan.shaper_changes) == (1, 1, 2)


def test_burst_read_back_from_timer_ticks_matches_what_tc_wrote() -> None:
    # /proc/net/psched on these machines: 1000 ns per tick unit over 64 -> 15.625 ticks/us.
    ticks_per_us = 1000 / 64
    shaper = tbf_parameters(1000, 64)
    rate_bytes = shaper.rate_bits_per_s // 8
    # tc: ticks = int(1e6 * burst / rate * ticks_per_us)
    buffer_ticks = int(1_000_000 * shaper.burst_bytes / rate_bytes * ticks_per_us)
    assert abs(burst_from_ticks(buffer_ticks, rate_bytes, ticks_per_us) - shaper.burst_bytes) <= 1


def test_seg6local_routes_are_set_after_and_deleted_like_routes_and_counted() -> None:
    from controller.southbound.linux.seg6 import Seg6Action, Seg6LocalRoute

    end = Seg6LocalRoute(IPv6Network("fcbb:bb00:1::/48"), Seg6Action.END, next_csid=True)
    last = Seg6LocalRoute(IPv6Network("fcbb:bb00:1::/128"), Seg6Action.END_DT6, 254)
    stale = Seg6LocalRoute(IPv6Network("fcbb:bb00:9::/48"), Seg6Action.END)
    wanted = KernelState(seg6local={end.prefix: end, last.prefix: last})
    held = KernelState(
        seg6local={
            last.prefix: Seg6LocalRoute(last.prefix, Seg6Action.END_DT6, 100),
            stale.prefix: stale,
        }
    )
    plan = plan_changes(wanted, held)
    assert (plan.inserts, plan.modifies, plan.deletes) == (1, 1, 1)
    assert set(plan.set_seg6local) == {end, last}
    assert plan.delete_seg6local == (stale,)
    assert plan_changes(wanted, wanted).empty


def test_a_prefix_changing_kind_is_overwritten_not_deleted_after_its_new_route_is_written() -> None:
    from controller.southbound.linux.seg6 import Seg6Action, Seg6LocalRoute

    prefix = IPv6Network("fcbb:bb00:1::/48")
    as_route = KernelState(routes={prefix: route(prefix, (1, IPv6Address("fe80::4d52:4300:0:1")))})
    as_seg6local = KernelState(seg6local={prefix: Seg6LocalRoute(prefix, Seg6Action.END)})
    to_seg6local = plan_changes(as_seg6local, as_route)
    assert to_seg6local.delete_routes == () and len(to_seg6local.set_seg6local) == 1
    to_route = plan_changes(as_route, as_seg6local)
    assert to_route.delete_seg6local == () and len(to_route.set_routes) == 1
