"""The settings that make a namespace forward like a fabric switch."""

from __future__ import annotations

from controller.southbound.linux.sysctls import forwarding_sysctls


def test_forwarding_and_l4_multipath_hash_for_both_families() -> None:
    settings = forwarding_sysctls(["swp1"])
    assert settings["net.ipv4.ip_forward"] == "1"
    assert settings["net.ipv6.conf.all.forwarding"] == "1"
    assert settings["net.ipv4.fib_multipath_hash_policy"] == "1"
    assert settings["net.ipv6.fib_multipath_hash_policy"] == "1"


def test_linkdown_routes_ignored_and_filters_off_on_all_default_and_every_port() -> None:
    settings = forwarding_sysctls(["swp1", "swp2"])
    for scope in ("all", "default", "swp1", "swp2"):
        assert settings[f"net.ipv4.conf.{scope}.ignore_routes_with_linkdown"] == "1"
        assert settings[f"net.ipv6.conf.{scope}.ignore_routes_with_linkdown"] == "1"
        assert settings[f"net.ipv4.conf.{scope}.rp_filter"] == "0"
        assert settings[f"net.ipv4.conf.{scope}.send_redirects"] == "0"
        assert settings[f"net.ipv4.conf.{scope}.accept_redirects"] == "0"
        assert settings[f"net.ipv6.conf.{scope}.accept_redirects"] == "0"


def test_a_namespace_without_ports_still_gets_the_global_settings() -> None:
    settings = forwarding_sysctls([])
    assert "net.ipv4.conf.default.ignore_routes_with_linkdown" in settings
    assert not any(".swp" in key for key in settings)
