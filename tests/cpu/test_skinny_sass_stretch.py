"""perf/skinny_sass_stretch.py: cuobjdump's SASS listing split by skinny_gemm instantiation, and the
instructions between the programmatic wait and the activation loads and first HMMA counted."""

from __future__ import annotations

from perf.skinny_sass_stretch import functions, stretch

NAME = "_ZN6voxcpm12_GLOBAL__N_118skinny_gemm_kernelI13__nv_bfloat16Li{}ELi{}ELi{}EEEvPKT_"


def listing(name: str, body: list[str]) -> str:
    lines = [f"        /*{16 * i:04x}*/                   {text} ;    /* 0x000fe2000001ff00 */"
             for i, text in enumerate(body)]
    return f"\n\t\tFunction : {name}\n\t.headerflags @\"EF_CUDA_SM90\"\n" + "\n".join(lines) + "\n"


BODY = [
    "LDC R1, c[0x0][0x28]",
    "LDG.E.NA.128.CONSTANT R20, desc[UR6][R20.64]",  # the weight, before the wait
    "ACQBULK",
    "IMAD R4, R2, 0x8, R3",
    "LDG.E.128.CONSTANT R8, desc[UR6][R4.64]",
    "LEA R6, P0, R4, UR8, 0x1",
    "LDG.E.128.CONSTANT R12, desc[UR6][R6.64]",
    "LDG.E.NA.128.CONSTANT R24, desc[UR6][R22.64]",  # the next round's weight
    "HMMA.16816.F32.BF16 R16, R20, R8, R16",
    "LDG.E.128.CONSTANT R28, desc[UR6][R4.64+0x40]",  # a later round's activations
    "EXIT",
]


def test_instantiations_are_told_apart_and_fp16_skipped():
    sass = (listing(NAME.format(2, 1, 0), BODY) + listing(NAME.format(1, 4, 1), BODY)
            + listing(NAME.replace("13__nv_bfloat16", "6__half").format(2, 1, 0), BODY))
    found = functions(sass)
    assert sorted(found) == [(1, 4, 1), (2, 1, 0)]
    assert found[(2, 1, 0)][2] == "ACQBULK" and len(found[(2, 1, 0)]) == len(BODY)


def test_counts_from_the_wait():
    counts = stretch(functions(listing(NAME.format(2, 1, 0), BODY))[(2, 1, 0)], loads=2)
    assert counts == {"before_wait": 2, "first_load": 2, "last_load": 4, "first_hmma": 6, "total": len(BODY)}
    # With three loads a pass, the third activation load is the later one.
    assert stretch(functions(listing(NAME.format(3, 1, 0), BODY))[(3, 1, 0)], loads=3)["last_load"] == 7
