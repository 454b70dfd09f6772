#!/usr/bin/env bash
# Adds srunway's SPANK plugin to the plugin stack the running Slurm reads, or takes it out, through a drop-in:
# PLUGSTACK_DIR/plugstack.conf.d/srunway.conf, included from plugstack.conf by a line
# "include PLUGSTACK_DIR/plugstack.conf.d/*.conf" (as pyxis recommends). Both are idempotent. Used by
# scripts/install-site.sh and by the .deb's maintainer scripts (installed as /usr/share/srunway/plugstack-dropin.sh).
#
# Usage: plugstack-dropin.sh add PLUGIN_PATH [PLUGIN_ARGS] [--plugstack FILE] [--comment TEXT]
#        plugstack-dropin.sh remove [--plugstack FILE]
#        plugstack-dropin.sh where [--plugstack FILE]     print the plugstack.conf it would change
# Without --plugstack: PlugStackConfig of `scontrol show config`, else plugstack.conf beside $SLURM_CONF or
# /etc/slurm/slurm.conf.
set -euo pipefail

die() { echo "plugstack-dropin: $*" >&2; exit 1; }

(($# >= 1)) || die "usage: plugstack-dropin.sh add PLUGIN_PATH [ARGS] | remove | where [--plugstack FILE]"
action=$1
shift
positional=() plugstack="" comment="srunway's SPANK plugin"
while (($#)); do
  case $1 in
    --plugstack) (($# >= 2)) || die "--plugstack needs a value"; plugstack=$2; shift 2 ;;
    --comment) (($# >= 2)) || die "--comment needs a value"; comment=$2; shift 2 ;;
    *) positional+=("$1"); shift ;;
  esac
done

if [[ -z $plugstack ]]; then
  plugstack=$(timeout 10 scontrol show config 2>/dev/null | awk '$1 == "PlugStackConfig" {print $3}' || true)
  [[ -n $plugstack && $plugstack != "(null)" ]] ||
    plugstack="$(dirname "${SLURM_CONF:-/etc/slurm/slurm.conf}")/plugstack.conf"
fi
readonly kDir="$(dirname "$plugstack")/plugstack.conf.d"
readonly kDropin="$kDir/srunway.conf" kInclude="include $(dirname "$plugstack")/plugstack.conf.d/*.conf"

case $action in
  where) echo "$plugstack" ;;
  add)
    ((${#positional[@]} >= 1)) || die "add needs the plugin's path"
    plugin=${positional[0]} args=${positional[1]:-default_profile=auto}
    [[ $plugin == /* && -f $plugin ]] || die "$plugin: no such plugin (an absolute path is needed)"
    mkdir -p "$kDir"
    printf '# %s\nrequired %s %s\n' "$comment" "$plugin" "$args" >"$kDropin.tmp"
    mv "$kDropin.tmp" "$kDropin"
    touch "$plugstack"
    grep -qxF "$kInclude" "$plugstack" || printf '%s\n' "$kInclude" >>"$plugstack"
    echo "plugstack-dropin: $plugstack includes $kDropin (required $plugin $args); new job steps load it" ;;
  remove)
    rm -f "$kDropin"
    # The include line goes too once no other drop-in is left.
    if ! compgen -G "$kDir/*.conf" >/dev/null && [[ -f $plugstack ]]; then
      { grep -vxF "$kInclude" "$plugstack" || true; } >"$plugstack.srunway-tmp"
      cat "$plugstack.srunway-tmp" >"$plugstack"
      rm -f "$plugstack.srunway-tmp"
      rmdir "$kDir" 2>/dev/null || true
    fi
    echo "plugstack-dropin: removed $kDropin" ;;
  *) die "unknown action '$action' (add, remove or where)" ;;
esac
