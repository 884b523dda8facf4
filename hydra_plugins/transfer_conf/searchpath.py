"""A team's own presets: `conf/<group>/<name>.yaml` in the folder a command runs from (a
checkout's top-level conf/, or any folder beside an installed wheel), e.g. conf/model/ours.yaml →
`model=ours`. Searched after the packaged groups (`transfer.conf`), which win where a name is in
both. Added only where ./conf exists: a `hydra.searchpath` entry in config.yaml would warn in
every folder without one."""

from __future__ import annotations

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin

from transfer.cli.clihelp import conf_dirs


class TeamConf(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        for user in conf_dirs()[1:]:  # the packaged conf/ is Hydra's primary path already
            search_path.append(provider="transfer-team-conf", path=f"file://{user}")
