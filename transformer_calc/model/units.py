"""Units and counting conventions, in one home: every module that counts FLOPs, bytes or seconds
imports them from here (issue 21), so two modules cannot disagree on what a FLOP or a GiB is.

- A multiply-accumulate is 2 FLOPs (one multiply, one add), as FlopCounterMode, Megatron-LM
  (Narayanan et al. 2021, eq. 3) and the seed count them.
- Bytes: decimal units (KB..TB = 10^3..10^12) as datasheets market memory and bandwidth; binary
  units (KiB..TiB = 2^10..2^40) as allocators and `nvidia-smi` report them.
"""

FLOPS_PER_MAC = 2  # one multiply, one add
BITS_PER_BYTE = 8

KB, MB, GB, TB = 10**3, 10**6, 10**9, 10**12
KIB, MIB, GIB, TIB = 2**10, 2**20, 2**30, 2**40

SECONDS_PER_HOUR = 3_600
SECONDS_PER_DAY = 86_400
