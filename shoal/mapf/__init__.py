"""Multi-agent path finding with recurrent, communicating agents (the DHC setting): the
shared Q-network, the joint sequence player and curriculum, training parts for the serial
and ray runners, and evaluation against baselines. The env is
:class:`shoal.envs.mapf.MapfEnv`."""
