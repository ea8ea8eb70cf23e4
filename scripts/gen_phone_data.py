#!/usr/bin/env python3
"""Generates domain/phone_data.c (and the test vectors tests/unit/domain/phone_vectors.h) from
Google's libphonenumber metadata as shipped by Debian's python3-phonenumbers.

    apt-get install -y python3-phonenumbers
    /usr/bin/python3 scripts/gen_phone_data.py

Per region (ISO 3166-1 alpha-2) the table holds: the country calling code, the international
(IDD) prefix, the national prefix for parsing and its transform rule, the general-description
national number pattern and its possible lengths. The metadata regexes are written for
Java/Python engines; this script converts them to POSIX extended regular expressions (regcomp
with REG_EXTENDED): `\\d` becomes `[0-9]` and `(?:` becomes a plain group. Since that renumbers
the capturing groups, group references of the transform rules are renumbered here too and stored
as bytes 1..31 (see domain/phone_data.h). A construct without an ERE equivalent (lookaround,
other escapes) raises Unsupported; such a region keeps only its possible lengths (pattern NULL)
and is listed on stderr. With metadata 8.12.57 every region converts.

The generated files are committed; run this again only to take newer metadata.
"""
import os
import sys

import phonenumbers
from phonenumbers import PhoneMetadata, PhoneNumberFormat

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Unsupported(Exception):
    pass


def to_ere(pattern):
    """Returns (ere, groups) where groups[i] is True when ERE group i+1 (in the converted text)
    was a capturing group of the original."""
    out, groups = [], []
    i, n, in_class = 0, len(pattern), False
    while i < n:
        ch = pattern[i]
        if in_class:
            if ch == "\\":
                if pattern[i + 1:i + 2] == "d":
                    out.append("0-9")
                    i += 2
                    continue
                raise Unsupported("escape \\%s in a class" % pattern[i + 1:i + 2])
            if ch == "]":
                in_class = False
            out.append(ch)
            i += 1
            continue
        if ch == "\\":
            nxt = pattern[i + 1:i + 2]
            if nxt == "d":
                out.append("[0-9]")
            elif nxt and nxt in ".+*?()[]{}|^$\\":
                out.append("\\" + nxt)
            else:
                raise Unsupported("escape \\%s" % nxt)
            i += 2
            continue
        if ch == "(":
            if pattern.startswith("(?:", i):
                groups.append(False)
                out.append("(")
                i += 3
                continue
            if pattern.startswith("(?", i):
                raise Unsupported("group %s" % pattern[i:i + 3])
            groups.append(True)
            out.append("(")
            i += 1
            continue
        if ch == "[":
            in_class = True
            out.append(ch)
            i += 1
            if pattern[i:i + 1] == "^":
                out.append("^")
                i += 1
            continue
        if ch in ".?*+{}|)^$0123456789,":
            out.append(ch)
            i += 1
            continue
        if ch.isalnum() or ch in "-":
            out.append(ch)
            i += 1
            continue
        raise Unsupported("character %r" % ch)
    if in_class:
        raise Unsupported("unterminated class")
    return "".join(out), groups


def c_str(s):
    if s is None:
        return "NULL"
    out = []
    for ch in s:
        o = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif o < 32:
            out.append("\\%03o" % o)
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def transform_template(rule, groups):
    """Python replacement text (\\1 style) -> literal bytes with ERE group indexes as bytes
    1..31. groups are those of the npfp wrapped as ^( ... ), so original group k is the k-th
    True entry, shifted by the wrapper."""
    capturing = [i + 2 for i, cap in enumerate(groups) if cap]  # +1 one-based, +1 wrapper
    out, i = [], 0
    while i < len(rule):
        ch = rule[i]
        if ch == "\\" and rule[i + 1:i + 2].isdigit():
            k = int(rule[i + 1])
            idx = capturing[k - 1]
            if idx > 31:
                raise Unsupported("group index %d" % idx)
            out.append(chr(idx))
            i += 2
            continue
        if ch == "$" and rule[i + 1:i + 2].isdigit():
            raise Unsupported("$ reference")
        out.append(ch)
        i += 1
    return "".join(out)


def regions_in_cc_order():
    order = []
    for cc in sorted(phonenumbers.COUNTRY_CODE_TO_REGION_CODE):
        for r in phonenumbers.COUNTRY_CODE_TO_REGION_CODE[cc]:
            if r in phonenumbers.SUPPORTED_REGIONS:
                order.append(r)
    return order


def build_rows():
    rows, fallbacks = [], []
    for r in regions_in_cc_order():
        m = PhoneMetadata.metadata_for_region(r)
        gd = m.general_desc
        lengths = 0
        for ln in gd.possible_length:
            if ln > 0:
                lengths |= 1 << ln
        try:
            pattern, _ = to_ere(gd.national_number_pattern)
            pattern = "^(" + pattern + ")$"
        except Unsupported as e:
            fallbacks.append("%s: %s" % (r, e))
            pattern = None
        intl = None
        if m.international_prefix:
            try:
                intl = "^(" + to_ere(m.international_prefix)[0] + ")"
            except Unsupported as e:
                fallbacks.append("%s international prefix: %s" % (r, e))
        npfp = m.national_prefix_for_parsing or None
        if not npfp and m.national_prefix:
            npfp = m.national_prefix
        npfp_ere, transform, last_group = None, None, 0
        if npfp:
            try:
                ere, groups = to_ere(npfp)
                npfp_ere = "^(" + ere + ")"
                caps = [i + 2 for i, cap in enumerate(groups) if cap]
                last_group = caps[-1] if caps else 0
                if m.national_prefix_transform_rule:
                    transform = transform_template(m.national_prefix_transform_rule, groups)
            except Unsupported as e:
                fallbacks.append("%s national prefix: %s" % (r, e))
                npfp_ere = None
        rows.append((r, m.country_code, intl, npfp_ere, transform, last_group, pattern, lengths))
    return rows, fallbacks


def write_data(rows):
    path = os.path.join(ROOT, "domain", "phone_data.c")
    with open(path, "w") as f:
        f.write("/* Generated by scripts/gen_phone_data.py from libphonenumber metadata %s.\n"
                " * Do not edit: run the script again to take newer metadata. */\n"
                % phonenumbers.__version__)
        f.write('#include "domain/phone_data.h"\n\n')
        f.write("const char phone_data_version[] = %s;\n\n" % c_str(phonenumbers.__version__))
        f.write("const phone_region_t phone_regions[] = {\n")
        for (r, cc, intl, npfp, transform, last, pattern, lengths) in rows:
            f.write("    {%s, %d, %s,\n     %s,\n     %s, %d,\n     %s,\n     0x%xu},\n" % (
                c_str(r), cc, c_str(intl), c_str(npfp), c_str(transform), last, c_str(pattern),
                lengths))
        f.write("};\n\nconst int phone_regions_count = %d;\n" % len(rows))


def vectors():
    """Example numbers of every region in national, international and E.164 form."""
    out = []
    types = (phonenumbers.PhoneNumberType.FIXED_LINE, phonenumbers.PhoneNumberType.MOBILE)
    for r in sorted(phonenumbers.SUPPORTED_REGIONS):
        for t in types:
            ex = phonenumbers.example_number_for_type(r, t)
            if ex is None:
                continue
            e164 = phonenumbers.format_number(ex, PhoneNumberFormat.E164)
            nat = phonenumbers.format_number(ex, PhoneNumberFormat.NATIONAL)
            intl = phonenumbers.format_number(ex, PhoneNumberFormat.INTERNATIONAL)
            # Only national forms that libphonenumber itself reads back to the same number.
            try:
                back = phonenumbers.parse(nat, r)
                nat_ok = phonenumbers.format_number(back, PhoneNumberFormat.E164) == e164
            except phonenumbers.NumberParseException:
                nat_ok = False
            out.append((r, nat if nat_ok else None, intl, e164))
    return out


def write_vectors(vecs):
    path = os.path.join(ROOT, "tests", "unit", "domain", "phone_vectors.h")
    with open(path, "w") as f:
        f.write("/* Generated by scripts/gen_phone_data.py: libphonenumber's example numbers\n"
                " * (fixed line and mobile) of every region; national form (NULL when\n"
                " * libphonenumber cannot read it back), international form, E.164. */\n")
        f.write("static const struct {\n    const char *region, *national, *international, *e164;\n"
                "} phone_vectors[] = {\n")
        for (r, nat, intl, e164) in vecs:
            f.write("    {%s, %s, %s, %s},\n" % (c_str(r), c_str(nat), c_str(intl), c_str(e164)))
        f.write("};\n")


def main():
    rows, fallbacks = build_rows()
    write_data(rows)
    write_vectors(vectors())
    for fb in fallbacks:
        print("fallback to possible lengths: " + fb, file=sys.stderr)
    print("phone_data.c: %d regions, %d fallbacks" % (len(rows), len(fallbacks)))


if __name__ == "__main__":
    main()
