#!/bin/sh
# debversion.sh DESCRIBE: prints the Debian package version for the output
# of `git describe --tags --always --dirty`. Tags are vX.Y.Z[-pre].
#
#   v1.2.3                    1.2.3
#   v1.2.3-rc1                1.2.3~rc1              (before 1.2.3)
#   v1.2.3-4-gabcdef0         1.2.3+4.gabcdef0       (after 1.2.3, before 1.2.4)
#   v1.2.3-4-gabcdef0-dirty   1.2.3+4.gabcdef0.dirty
#   abcdef0 (no tag yet)      0.0.0+gitabcdef0
#   abcdef0-dirty             0.0.0+gitabcdef0.dirty
set -eu

if [ $# -ne 1 ] || [ -z "$1" ]; then
	echo "usage: debversion.sh \"\$(git describe --tags --always --dirty)\"" >&2
	exit 2
fi
v=${1#v}
extra=
case $v in
*-dirty)
	v=${v%-dirty}
	dirty=dirty
	;;
*) dirty= ;;
esac
# Commits after a tag: TAG-N-gHASH.
if printf '%s\n' "$v" | grep -Eq -- '-[0-9]+-g[0-9a-f]+$'; then
	extra=$(printf '%s\n' "$v" | sed -E 's/^.*-([0-9]+)-g([0-9a-f]+)$/\1.g\2/')
	v=$(printf '%s\n' "$v" | sed -E 's/-[0-9]+-g[0-9a-f]+$//')
fi
case $v in
[0-9]*.*)
	# A tag; a pre-release part sorts before the release.
	v=$(printf '%s\n' "$v" | tr '-' '~')
	;;
*)
	# No tag: describe printed an abbreviated commit hash.
	extra=git$v${extra:+.$extra}
	v=0.0.0
	;;
esac
[ -n "$dirty" ] && extra=${extra:+$extra.}$dirty
out=$v${extra:++$extra}
if ! printf '%s\n' "$out" | grep -Eq '^[0-9][A-Za-z0-9.+~]*$'; then
	echo "debversion.sh: cannot make a Debian version of \"$1\" (got \"$out\")" >&2
	exit 1
fi
printf '%s\n' "$out"
