"""transfer's submitit launchers, where Hydra looks for plugins (it instantiates a launcher only
from the `hydra_plugins` package). The code is `transfer.cli.launcher`'s; without the `slurm`
extra (hydra-submitit-launcher) there is nothing to register."""

from transfer.cli import launcher

if launcher.plugin is not None:  # pip install 'transfer[slurm]'

    class SlurmLauncher(launcher.SlurmLauncher):
        """`hydra/launcher=slurm`: one SLURM array task per sweep job."""

    class LocalLauncher(launcher.LocalLauncher):
        """`hydra/launcher=local_workers`: the same jobs as processes on this machine."""
