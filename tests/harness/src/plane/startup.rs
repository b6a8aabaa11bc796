//! Waiting for each component to become ready.

use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Config;
use kube::api::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};

use super::running::{Processes, lock, wait_guarded};
use super::{
    APISERVER_READY_TIMEOUT, CONTROLLERS_READY_TIMEOUT, ControlPlane, ETCD_READY_TIMEOUT, PlaneOptions,
};
use crate::binaries::Binaries;
use crate::components::{self, Layout};
use crate::credentials::{self, Credentials};
use crate::netns::NetworkNamespace;
use crate::process::Process;
use crate::wait::NotYet;
use crate::{PlaneError, nodes};

impl ControlPlane {
    /// Polls until `probe` succeeds, failing early when a component exits.
    async fn wait_while_running<T, F, Fut>(
        &self,
        what: &str,
        timeout: Duration,
        probe: F,
    ) -> Result<T, PlaneError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, NotYet>>,
    {
        wait_guarded(&self.processes, what, timeout, probe).await
    }

    pub(super) async fn wait_for_apiserver(&self) -> Result<(), PlaneError> {
        let http = self.https_client()?;
        let url = format!("{}/readyz", self.url());
        let token = self.credentials.admin_token().to_owned();
        self.wait_while_running("kube-apiserver /readyz", APISERVER_READY_TIMEOUT, || {
            let request = http.get(&url).bearer_auth(&token);
            async move {
                let response = request.send().await?;
                let status = response.status();
                let body = response.text().await?;
                if status.is_success() && body.trim() == "ok" {
                    Ok(())
                } else {
                    Err(NotYet::because(format!("{status}: {}", last_line(&body))))
                }
            }
        })
        .await
    }

    pub(super) async fn start_controllers(&self) -> Result<(), PlaneError> {
        let layout = &self.layout;
        let network = self.network.as_deref();
        let controller_manager = start_in(
            network,
            "kube-controller-manager",
            &self.binaries.kube_controller_manager,
            &components::controller_manager_args(layout, &self.credentials),
            &[],
            &layout.log("kube-controller-manager"),
        )?;
        lock(&self.processes).controller_manager = Some(controller_manager);
        let scheduler = start_in(
            network,
            "kube-scheduler",
            &self.binaries.kube_scheduler,
            &components::scheduler_args(layout),
            &[],
            &layout.log("kube-scheduler"),
        )?;
        lock(&self.processes).scheduler = Some(scheduler);
        let kwok = start_in(
            network,
            "kwok",
            &self.binaries.kwok,
            &components::kwok_args(layout, &self.binaries.kwok_stage_files()?),
            &[("HOME", layout.kwok_home.as_path())],
            &layout.log("kwok"),
        )?;
        lock(&self.processes).kwok = Some(kwok);

        let client = self.client();
        nodes::create_fake_nodes(&client, self.options.fake_nodes).await?;
        let insecure = reqwest::Client::builder()
            // Only the components' own /healthz on loopback, served with throwaway certificates.
            .danger_accept_invalid_certs(true)
            .timeout(Duration::from_secs(5))
            .build()?;
        for (name, port) in [
            ("kube-controller-manager", layout.ports.controller_manager),
            ("kube-scheduler", layout.ports.scheduler),
        ] {
            let url = format!("https://127.0.0.1:{port}/healthz");
            self.wait_while_running(&format!("{name} /healthz"), CONTROLLERS_READY_TIMEOUT, || {
                let request = insecure.get(&url);
                async move {
                    let response = request.send().await?;
                    let status = response.status();
                    if status.is_success() { Ok(()) } else { Err(NotYet::because(status.to_string())) }
                }
            })
            .await?;
        }
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
        self.wait_while_running(
            "the serviceaccount controller to create default/default",
            CONTROLLERS_READY_TIMEOUT,
            || async { accounts.get("default").await.map(drop).map_err(NotYet::from) },
        )
        .await?;
        let expected = self.options.fake_nodes;
        self.wait_while_running("KWOK to make the fake nodes Ready", CONTROLLERS_READY_TIMEOUT, || {
            nodes::ready_fake_nodes(&client, expected)
        })
        .await
    }

    /// An HTTPS client trusting the API server's self-signed certificate.
    fn https_client(&self) -> Result<reqwest::Client, PlaneError> {
        let pem = read(&self.layout.apiserver_certificate())?;
        let mut builder = reqwest::Client::builder().timeout(Duration::from_secs(10));
        for certificate in reqwest::Certificate::from_pem_bundle(&pem)? {
            builder = builder.add_root_certificate(certificate);
        }
        Ok(builder.build()?)
    }
}

pub(super) fn start_apiserver_process(
    binaries: &Binaries,
    layout: &Layout,
    credentials: &Credentials,
    options: &PlaneOptions,
    network: Option<&NetworkNamespace>,
) -> Result<Process, PlaneError> {
    let mut args = components::apiserver_args(layout, credentials, options.controllers);
    args.extend(options.apiserver_args.iter().cloned());
    start_in(network, "kube-apiserver", &binaries.kube_apiserver, &args, &[], &layout.log("kube-apiserver"))
}

pub(super) fn start_etcd_process(
    binaries: &Binaries,
    layout: &Layout,
    network: Option<&NetworkNamespace>,
) -> Result<Process, PlaneError> {
    start_in(network, "etcd", &binaries.etcd, &components::etcd_args(layout), &[], &layout.log("etcd"))
}

/// Starts a component, inside `network` when there is one.
pub(crate) fn start_in(
    network: Option<&NetworkNamespace>,
    name: &str,
    program: &Path,
    args: &[String],
    envs: &[(&str, &Path)],
    log: &Path,
) -> Result<Process, PlaneError> {
    match network {
        None => Process::start(name, program, args, envs, log),
        Some(network) => {
            let (nsenter, mut entered) = network.enter(program);
            entered.extend(args.iter().cloned());
            Process::start(name, &nsenter, &entered, envs, log)
        }
    }
}

pub(super) async fn wait_for_etcd(layout: &Layout, processes: &Mutex<Processes>) -> Result<(), PlaneError> {
    let http = reqwest::Client::builder().timeout(Duration::from_secs(5)).build()?;
    let url = format!("{}/health", layout.etcd_url());
    wait_guarded(processes, "etcd /health", ETCD_READY_TIMEOUT, || {
        let request = http.get(&url);
        async move {
            let body = request.send().await?.text().await?;
            if body.contains(r#""health":"true""#) { Ok(()) } else { Err(NotYet::because(body)) }
        }
    })
    .await
}

/// Waits for the serving certificate kube-apiserver generates, then writes the kubeconfig
/// trusting it and loads it as the admin client configuration.
pub(super) async fn write_admin_kubeconfig(
    layout: &Layout,
    credentials: &Credentials,
    processes: &Mutex<Processes>,
) -> Result<Config, PlaneError> {
    let certificate = layout.apiserver_certificate();
    let pem =
        wait_guarded(processes, "kube-apiserver's serving certificate", APISERVER_READY_TIMEOUT, || {
            let certificate = certificate.clone();
            async move {
                // The key is written after the certificate; both must be complete.
                let key_written = certificate.with_extension("key").exists();
                match std::fs::read(&certificate) {
                    Ok(pem) if key_written && pem.ends_with(b"-----END CERTIFICATE-----\n") => Ok(pem),
                    Ok(_) => Err(NotYet::because("being written")),
                    Err(error) => Err(error.into()),
                }
            }
        })
        .await?;
    let kubeconfig = credentials::admin_kubeconfig(&layout.apiserver_url(), &pem, credentials.admin_token());
    credentials::write_private(&layout.kubeconfig, &kubeconfig)?;
    let parsed = Kubeconfig::read_from(&layout.kubeconfig)?;
    Ok(Config::from_custom_kubeconfig(parsed, &KubeConfigOptions::default()).await?)
}

fn read(path: &Path) -> Result<Vec<u8>, PlaneError> {
    std::fs::read(path)
        .map_err(|source| PlaneError::Io { context: format!("reading {}", path.display()), source })
}

fn last_line(text: &str) -> &str {
    text.trim().lines().last().unwrap_or_default()
}
