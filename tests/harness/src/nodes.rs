//! Fake nodes: Node objects KWOK adopts (by annotation) and keeps Ready, so the scheduler binds
//! pods to them and KWOK marks those pods Running and Ready.

use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

use crate::PlaneError;
use crate::components::FAKE_NODE_ANNOTATION;
use crate::wait::NotYet;

/// Label every fake node carries, to select them.
pub const FAKE_NODE_LABEL: (&str, &str) = ("type", "kwok");

pub fn fake_node_name(index: usize) -> String {
    format!("kwok-node-{index}")
}

fn fake_node(name: &str) -> Result<Node, PlaneError> {
    let (annotation, annotation_value) = FAKE_NODE_ANNOTATION;
    let (label, label_value) = FAKE_NODE_LABEL;
    let capacity = json!({ "cpu": "32", "memory": "256Gi", "pods": "110" });
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": { annotation: annotation_value, "node.alpha.kubernetes.io/ttl": "0" },
            "labels": {
                label: label_value,
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
            },
        },
        // Nodes accept status on create; KWOK keeps the rest of it up to date.
        "status": { "capacity": capacity, "allocatable": capacity },
    }))
    .map_err(|error| PlaneError::Manifest { what: format!("fake node {name}"), detail: error.to_string() })
}

pub async fn create_fake_nodes(client: &Client, count: usize) -> Result<(), PlaneError> {
    let nodes: Api<Node> = Api::all(client.clone());
    for index in 0..count {
        match nodes.create(&PostParams::default(), &fake_node(&fake_node_name(index))?).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => return Err(error.into()),
        }
    }
    Ok(())
}

/// Ok when `expected` fake nodes report Ready.
pub async fn ready_fake_nodes(client: &Client, expected: usize) -> Result<(), NotYet> {
    let (label, value) = FAKE_NODE_LABEL;
    let nodes: Api<Node> = Api::all(client.clone());
    let listed = nodes.list(&ListParams::default().labels(&format!("{label}={value}"))).await?;
    let ready = listed.items.iter().filter(|node| is_ready(node)).count();
    if ready >= expected {
        Ok(())
    } else {
        Err(NotYet::because(format!("{ready} of {expected} nodes Ready")))
    }
}

fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .is_some_and(|conditions| conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}
