"""The ``tofino`` target: the P4Runtime southbound for Tofino switches (Stratum or the SDE).

``device_config`` packs the compiled program as each P4Runtime server expects it;
``southbound`` is the finsy P4Runtime southbound with the pipeline so packed, each switch's
ports renumbered by the topology's port map, and no Thrift; ``target`` declares the target
(its configuration section, check, southbound and capabilities).
"""
