#!/bin/bash
#
# plugin.sh - DevStack plugin of nova-cyborg
#
# Contract: https://docs.openstack.org/devstack/latest/plugins.html
# (source plugin.sh <mode> [phase]). On every host that runs a Nova service
# this plugin installs nova-cyborg next to Nova, applies the patch series to
# the Nova devstack installed and configures nova.conf for it; on hosts
# that run nova-compute it runs nova-cyborg-sidecar in place of
# cyborg-agent. Nova's own services are started (and stopped) by devstack:
# the series is applied in the install phase, before any of them starts.
#
# stack pre-install   refuse a configuration that cannot work
# stack install       install nova-cyborg, check and apply the series
# stack post-config   nova.conf options, the sidecar's configuration
# stack extra         start the sidecar once nova-compute is up
# stack test-config   tell tempest that nova-cyborg is there
# unstack             stop the sidecar
# clean               revert the series, remove the sidecar's files

NOVA_CYBORG_PATCH="$NOVA_CYBORG_BIN_DIR/nova-cyborg-patch"


# Checks
# ------

function nova_cyborg_check_config {
    if [[ ",${DISABLED_SERVICES}," =~ ,nova-cyborg ]]; then
        die $LINENO "disable_service was given a nova-cyborg service" \
            "(DISABLED_SERVICES=$DISABLED_SERVICES). Any disabled service" \
            "whose name starts with 'nova' makes devstack skip Nova on this" \
            "host. To leave the sidecar out, set NOVA_CYBORG_SIDECAR=False."
    fi
    # Both would serve the topic cyborg-agent for this host and report its
    # devices to cyborg-conductor.
    if is_service_enabled nova-cyborg-sidecar && \
            is_service_enabled cyborg-agent; then
        die $LINENO "nova-cyborg-sidecar replaces cyborg-agent: add" \
            "'disable_service cyborg-agent' to local.conf (after" \
            "'enable_plugin cyborg ...'), or set NOVA_CYBORG_SIDECAR=False" \
            "on this host."
    fi
    if is_service_enabled nova && \
            [[ ! -f "$NOVA_CYBORG_PATCHES_DIR/nova-$NOVA_BRANCH/series" ]]; then
        # Only a warning: NOVA_BRANCH may be a gerrit ref or a local branch
        # of a supported release. The install phase checks the real tree.
        local supported
        supported=$(cd "$NOVA_CYBORG_PATCHES_DIR" && echo nova-*)
        warn $LINENO "NOVA_BRANCH=$NOVA_BRANCH has no patch series in\
 $NOVA_CYBORG_PATCHES_DIR (there: $supported); the install phase fails\
 unless Nova's version is one of them. Set NOVA_BRANCH to that tag."
    fi
}


# Install
# -------

function install_nova_cyborg {
    if is_service_enabled nova-cyborg-sidecar; then
        # The sidecar extra adds libvirt-python (Nova's libvirt driver has
        # it already on a compute host).
        setup_develop "$NOVA_CYBORG_DIR" sidecar
    else
        setup_develop "$NOVA_CYBORG_DIR"
    fi
}

# Apply the series to the Nova that $NOVA_CYBORG_BIN_DIR's Python imports,
# that is $NOVA_DIR as installed by devstack (editable). "check" first:
# it exits 0 when the series is applied or applies cleanly, 1 on a
# conflict or a partially applied tree, 2 for a Nova release without a
# series. "apply" is atomic and does nothing when the series is applied,
# so stacking again without RECLONE is fine.
function nova_cyborg_apply_patches {
    local args=(--patches-dir "$NOVA_CYBORG_PATCHES_DIR")
    local rc=0

    "$NOVA_CYBORG_PATCH" "${args[@]}" check || rc=$?
    case $rc in
        0)
            ;;
        2)
            die $LINENO "nova-cyborg-patch: no patch series for the Nova" \
                "in $NOVA_DIR (NOVA_BRANCH=$NOVA_BRANCH), or its version is" \
                "unknown (see above). Check Nova out at a release tag that" \
                "has a series, for example NOVA_BRANCH=34.0.0, and stack" \
                "again with RECLONE=True."
            ;;
        *)
            die $LINENO "nova-cyborg-patch check failed (exit $rc): the" \
                "series conflicts with $NOVA_DIR or is only partly applied" \
                "there (the state of each patch is above). Restore Nova's" \
                "tree (git -C $NOVA_DIR checkout -- nova) or stack again" \
                "with RECLONE=True."
            ;;
    esac

    "$NOVA_CYBORG_PATCH" "${args[@]}" apply || \
        die $LINENO "nova-cyborg-patch apply failed; nothing was changed."
    "$NOVA_CYBORG_PATCH" "${args[@]}" status
}


# Configure
# ---------

# Options of every nova.conf a Nova service reads on this host: nova.conf
# itself (nova-api, the super conductor, nova-scheduler, and nova-compute,
# whose nova-cpu.conf devstack copies from it when it starts the service)
# and each cell conductor's file.
function _nova_cyborg_nova_confs {
    local conf
    local i
    echo "$NOVA_CONF"
    if is_service_enabled n-cond; then
        for i in $(seq 1 "$NOVA_NUM_CELLS"); do
            conf=$(conductor_conf "$i")
            if [[ -f "$conf" && "$conf" != "$NOVA_CONF" ]]; then
                echo "$conf"
            fi
        done
    fi
}

function configure_nova_cyborg {
    local conf
    # stack.sh runs configure_neutron_nova in the background during this
    # phase, and it edits nova.conf too: wait for it, so that two iniset
    # never rewrite the file at the same time (waiting again later is a
    # no-op).
    async_wait configure_neutron_nova
    for conf in $(_nova_cyborg_nova_confs); do
        # Cyborg binds, unbinds and deletes an instance's ARQs only for a
        # request with a service token that has the "service" role
        # (devstack's nova user has it). devstack sets this in nova.conf
        # when NOVA_USE_SERVICE_TOKEN=True; nova-cyborg needs it in every
        # file, including the cell conductors', which rebind on reschedule.
        iniset "$conf" service_user send_service_user_token True
        configure_keystoneauth "$conf" nova service_user
        # Where Cyborg is: the "accelerator" endpoint in the catalog.
        iniset "$conf" cyborg region_name "$REGION_NAME"
        # Both are nova-cyborg's defaults; written out so that nova.conf
        # shows what the deployment relies on.
        iniset "$conf" nova_cyborg require_service_token True
        iniset "$conf" nova_cyborg service_user_without_user_token True
    done
}

# keystoneauth options of a section of the sidecar's file. Not devstack's
# configure_keystoneauth: it writes the deprecated "interface" option,
# which keystoneauth refuses together with valid_interfaces (the sidecar
# sets a default for the latter).
function _nova_cyborg_sidecar_auth {
    local section=$1
    local conf=$NOVA_CYBORG_SIDECAR_CONF
    iniset "$conf" "$section" auth_type password
    iniset "$conf" "$section" auth_url "$KEYSTONE_SERVICE_URI"
    iniset "$conf" "$section" username cyborg
    iniset "$conf" "$section" password "$SERVICE_PASSWORD"
    iniset "$conf" "$section" user_domain_name "$SERVICE_DOMAIN_NAME"
    iniset "$conf" "$section" project_name "$SERVICE_PROJECT_NAME"
    iniset "$conf" "$section" project_domain_name "$SERVICE_DOMAIN_NAME"
    iniset "$conf" "$section" region_name "$REGION_NAME"
    iniset "$conf" "$section" valid_interfaces public
    if is_service_enabled tls-proxy; then
        iniset "$conf" "$section" cafile "$SSL_BUNDLE_FILE"
    fi
}

function configure_nova_cyborg_sidecar {
    local conf=$NOVA_CYBORG_SIDECAR_CONF
    local host

    sudo install -d -o "$STACK_USER" "$NOVA_CYBORG_CONF_DIR"
    install -d "$NOVA_CYBORG_SIDECAR_STATE_PATH"
    rm -f "$conf"

    # nova-compute's host: cyborg-conductor calls the sidecar on the RPC
    # server of that name and deployables are named <host>_<address>.
    host=$(iniget "$NOVA_CONF" DEFAULT host)
    iniset "$conf" DEFAULT host "${host:-$(hostname)}"
    iniset "$conf" DEFAULT debug "$ENABLE_DEBUG_LOG_LEVEL"
    # cyborg-conductor's broker and virtual host (lib/cyborg uses the
    # default one).
    iniset_rpc_backend nova-cyborg "$conf"

    iniset "$conf" sidecar enabled_drivers "$NOVA_CYBORG_SIDECAR_DRIVERS"
    iniset "$conf" sidecar discovery_source \
        "$NOVA_CYBORG_SIDECAR_DISCOVERY_SOURCE"
    iniset "$conf" sidecar state_path "$NOVA_CYBORG_SIDECAR_STATE_PATH"
    if [[ -n "$NOVA_CYBORG_SIDECAR_RP_NAME" ]]; then
        iniset "$conf" sidecar resource_provider_name \
            "$NOVA_CYBORG_SIDECAR_RP_NAME"
    fi
    if [[ -n "$NOVA_CYBORG_SIDECAR_PCI_DEVICE_SPEC" ]]; then
        iniset "$conf" pci device_spec "$NOVA_CYBORG_SIDECAR_PCI_DEVICE_SPEC"
    fi
    if [[ -n "$NOVA_CYBORG_SIDECAR_MDEV_TYPES" ]]; then
        iniset "$conf" gpu enabled_mdev_types "$NOVA_CYBORG_SIDECAR_MDEV_TYPES"
    fi

    # The sidecar updates its providers' inventories and traits in
    # Placement, downloads bitstreams from Glance and reads the ARQs of a
    # card's servers from Cyborg before programming it, as Cyborg's service
    # user, which the cyborg plugin creates.
    _nova_cyborg_sidecar_auth placement
    _nova_cyborg_sidecar_auth glance
    _nova_cyborg_sidecar_auth cyborg

    # Privileged work (sysfs writes for mdevs and FPGA programming) runs in
    # an oslo.privsep daemon started through sudo; the stack user may sudo.
    iniset "$conf" sidecar_privsep helper_command \
        "sudo $NOVA_CYBORG_BIN_DIR/privsep-helper --config-file $conf"

    setup_logging "$conf"
}


# Start and stop
# --------------

function start_nova_cyborg_sidecar {
    local unit=$SYSTEMD_DIR/devstack@nova-cyborg-sidecar.service

    # The sidecar exits (code 1) if the compute node's resource provider
    # is not in Placement after about 30 seconds: wait for nova-compute.
    if is_service_enabled n-cpu && \
            ! wait_for_compute "$NOVA_READY_TIMEOUT"; then
        warn $LINENO "nova-compute is not up: the sidecar exits and is\
 started again until the compute node's provider is in Placement."
    fi

    # In nova-compute's group, like n-cpu, for libvirt's socket.
    run_process nova-cyborg-sidecar \
        "$NOVA_CYBORG_BIN_DIR/nova-cyborg-sidecar --config-file $NOVA_CYBORG_SIDECAR_CONF" \
        "${LIBVIRT_GROUP:-}"

    # As etc/nova-cyborg-sidecar.service: systemd starts it again after a
    # failed start (Placement or the provider not there yet).
    iniset -sudo "$unit" Service Restart on-failure
    iniset -sudo "$unit" Service RestartSec 5
    $SYSTEMCTL daemon-reload
}

function stop_nova_cyborg_sidecar {
    stop_process nova-cyborg-sidecar
}


# Tempest
# -------

# The project's tempest plugin (entry point tempest.test_plugins) is
# installed into tempest's venv by devstack from TEMPEST_PLUGINS (see
# local.conf.sample); its tests run only when this is set.
function configure_tempest_nova_cyborg {
    iniset "$TEMPEST_CONFIG" service_available nova_cyborg True
}


# Clean
# -----

# Give devstack back an unpatched Nova tree. A failure is reported, not
# fatal: clean.sh goes on cleaning the other services.
function cleanup_nova_cyborg {
    if [[ -x $NOVA_CYBORG_PATCH ]] && \
            ! "$NOVA_CYBORG_PATCH" --patches-dir "$NOVA_CYBORG_PATCHES_DIR" revert
    then
        warn $LINENO "nova-cyborg-patch revert failed; restore Nova's tree\
 with: git -C $NOVA_DIR checkout -- nova"
    fi
}

function cleanup_nova_cyborg_sidecar {
    sudo rm -rf "$NOVA_CYBORG_CONF_DIR"
    rm -rf "$NOVA_CYBORG_SIDECAR_STATE_PATH"
}


# Dispatch
# --------

if [[ "$1" == "stack" ]]; then
    case "$2" in
        pre-install)
            nova_cyborg_check_config
            ;;
        install)
            if is_service_enabled nova; then
                echo_summary "Installing nova-cyborg and patching Nova"
                install_nova_cyborg
                nova_cyborg_apply_patches
            fi
            ;;
        post-config)
            if is_service_enabled nova; then
                echo_summary "Configuring Nova for nova-cyborg"
                configure_nova_cyborg
            fi
            if is_service_enabled nova-cyborg-sidecar; then
                echo_summary "Configuring nova-cyborg-sidecar"
                configure_nova_cyborg_sidecar
            fi
            ;;
        extra)
            if is_service_enabled nova-cyborg-sidecar; then
                echo_summary "Starting nova-cyborg-sidecar"
                start_nova_cyborg_sidecar
            fi
            ;;
        test-config)
            if is_service_enabled tempest; then
                echo_summary "Configuring Tempest for nova-cyborg"
                configure_tempest_nova_cyborg
            fi
            ;;
    esac
elif [[ "$1" == "unstack" ]]; then
    stop_nova_cyborg_sidecar
elif [[ "$1" == "clean" ]]; then
    if is_service_enabled nova; then
        cleanup_nova_cyborg
    fi
    if is_service_enabled nova-cyborg-sidecar; then
        cleanup_nova_cyborg_sidecar
    fi
fi
