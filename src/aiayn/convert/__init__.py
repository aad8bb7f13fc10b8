"""Converters from other libraries' checkpoints to aiayn models. Foreign parameter names
(``c_attn``, ``query``, ...) live only in these modules, which map them to aiayn's."""
