//! Helpers of tests/sidecar.rs: the sidecar process, a recording HTTP endpoint, and a reader of
//! the target directory that follows the documented protocol.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use kube::api::{ObjectMeta, Patch, PatchParams};
use reloader_harness::process::{Process, tail};
use reloader_harness::{NotYet, free_port, reloader_binary, wait_until};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

pub const WAIT: Duration = Duration::from_secs(60);

/// A running `reloader sidecar`, killed on drop; its output goes to `<work>/sidecar.log`.
pub struct Sidecar {
    pub process: Process,
    pub dir: PathBuf,
    metrics_port: u16,
}

impl Sidecar {
    pub fn start(kubeconfig: &Path, namespace: &str, work: &Path, extra: &[&str]) -> Self {
        let dir = work.join("config");
        let metrics_port = free_port();
        let mut args: Vec<String> = vec![
            "sidecar".into(),
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--namespace={namespace}"),
            format!("--path={}", dir.display()),
            format!("--metrics-addr=127.0.0.1:{metrics_port}"),
        ];
        args.extend(extra.iter().map(|a| a.to_string()));
        let process =
            Process::start("reloader-sidecar", &reloader_binary(), &args, &[], &work.join("sidecar.log"))
                .expect("starting reloader sidecar");
        Self { process, dir, metrics_port }
    }

    pub fn log(&self) -> String {
        fs::read_to_string(self.process.log()).unwrap_or_default()
    }

    pub fn assert_running(&mut self) {
        if let Some(status) = self.process.exited() {
            panic!("the sidecar exited ({status}):\n{}", self.log());
        }
    }

    pub async fn wait_for_exit(&mut self, timeout: Duration) -> std::process::ExitStatus {
        let process = &mut self.process;
        let waited = wait_until("the sidecar to exit", timeout, || {
            let status = process.exited();
            async move { status.ok_or_else(|| NotYet::because("still running")) }
        })
        .await;
        match waited {
            Ok(status) => status,
            Err(e) => panic!("{e}\n{}", self.log()),
        }
    }

    pub async fn get(&self, path: &str) -> (u16, String) {
        let url = format!("http://127.0.0.1:{}{path}", self.metrics_port);
        let response = reqwest::get(&url).await.unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    }
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let lines = tail(self.process.log(), 60).unwrap_or_default().join("\n");
            eprintln!("----- last lines of the sidecar's log -----\n{lines}");
        }
    }
}

/// An HTTP endpoint on 127.0.0.1 that answers 204 and records when each request arrived.
pub struct Endpoint {
    pub url: String,
    pub calls: Arc<Mutex<Vec<(Instant, String)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Endpoint {
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/-/reload", listener.local_addr().unwrap());
        let calls: Arc<Mutex<Vec<(Instant, String)>>> = Arc::default();
        let recorded = calls.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let recorded = recorded.clone();
                tokio::spawn(async move {
                    let mut request = Vec::new();
                    let mut buffer = [0u8; 1024];
                    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buffer).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => request.extend_from_slice(&buffer[..n]),
                        }
                    }
                    let request_line =
                        String::from_utf8_lossy(&request).lines().next().unwrap_or_default().to_owned();
                    recorded.lock().unwrap().push((Instant::now(), request_line));
                    let _ = stream
                        .write_all(
                            b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                        )
                        .await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        Self { url, calls, task }
    }

    pub fn count(&self) -> usize {
        self.calls.lock().unwrap().len()
    }

    pub fn times(&self) -> Vec<Instant> {
        self.calls.lock().unwrap().iter().map(|(at, _)| *at).collect()
    }

    pub async fn wait_for(&self, count: usize) {
        wait_until(&format!("{count} notification(s)"), WAIT, || {
            let seen = self.count();
            async move { if seen >= count { Ok(()) } else { Err(NotYet::because(format!("{seen} so far"))) } }
        })
        .await
        .unwrap();
        assert_eq!(self.count(), count, "more notifications than content changes");
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One generation of the directory, read the way an application that needs a consistent set
/// must read it: resolve `..data` once, read the files under it, and start again if `..data` moved
/// meanwhile (the old generation is being removed). `None` before the first write.
pub fn read_generation(dir: &Path) -> io::Result<Option<BTreeMap<String, Vec<u8>>>> {
    loop {
        let before = match fs::read_link(dir.join("..data")) {
            Ok(target) => target,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let generation = dir.join(&before);
        let mut files = BTreeMap::new();
        let listed = fs::read_dir(&generation).and_then(|entries| {
            for entry in entries {
                let entry = entry?;
                files.insert(entry.file_name().into_string().unwrap(), fs::read(entry.path())?);
            }
            Ok(())
        });
        match listed {
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
            Ok(()) if fs::read_link(dir.join("..data"))? == before => return Ok(Some(files)),
            Ok(()) => continue,
        }
    }
}

pub fn text_files(dir: &Path) -> BTreeMap<String, String> {
    read_generation(dir)
        .unwrap()
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, String::from_utf8_lossy(&v).into_owned()))
        .collect()
}

pub async fn wait_for_files(dir: &Path, what: &str, check: impl Fn(&BTreeMap<String, String>) -> bool) {
    wait_until(what, WAIT, || {
        let files = text_files(dir);
        let ok = check(&files);
        async move { if ok { Ok(()) } else { Err(NotYet::because(format!("{:?}", files.keys()))) } }
    })
    .await
    .unwrap();
}

pub fn generation_dirs(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("..") && n != "..data")
        .collect()
}

pub fn mode(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o777
}

pub fn configmap(name: &str, data: &[(&str, &str)], binary: &[(&str, &[u8])]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta { name: Some(name.to_owned()), ..Default::default() },
        data: Some(data.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
        binary_data: (!binary.is_empty())
            .then(|| binary.iter().map(|(k, v)| (k.to_string(), ByteString(v.to_vec()))).collect()),
        ..Default::default()
    }
}

pub fn secret(name: &str, data: &[(&str, &str)]) -> Secret {
    Secret {
        metadata: ObjectMeta { name: Some(name.to_owned()), ..Default::default() },
        data: Some(data.iter().map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec()))).collect()),
        ..Default::default()
    }
}

pub async fn merge_patch<K>(api: &Api<K>, name: &str, patch: serde_json::Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
}

pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

pub fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}
