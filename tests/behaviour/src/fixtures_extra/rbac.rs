//! The namespaced permissions of a reloader that watches only some namespaces (docs/compatibility.md §13,
//! namespaced mode, without Argo, OpenShift, HA or CSI), granted to a ServiceAccount.

use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::json;

use reloader_harness::PlaneError;

const ROLE_NAME: &str = "reloader-tests-namespaced";

/// Creates a Role with reloader's namespaced permissions in `namespace` and binds it to
/// ServiceAccount `account_namespace/account_name`. No ClusterRole is involved.
pub async fn grant_namespaced_reloader_role(
    admin: &Client,
    namespace: &str,
    account_namespace: &str,
    account_name: &str,
) -> Result<(), PlaneError> {
    let read = ["get", "list", "watch"];
    let role: Role = serde_json::from_value(json!({
        "metadata": { "name": ROLE_NAME },
        "rules": [
            { "apiGroups": [""], "resources": ["configmaps", "secrets"], "verbs": read },
            {
                "apiGroups": ["apps"],
                "resources": ["deployments", "daemonsets", "statefulsets"],
                "verbs": ["get", "list", "watch", "update", "patch"],
            },
            { "apiGroups": ["batch"], "resources": ["cronjobs"], "verbs": read },
            { "apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "watch", "create", "delete"] },
            { "apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"] },
        ],
    }))
    .expect("the Role manifest matches its type");
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": { "name": ROLE_NAME },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ROLE_NAME },
        "subjects": [{ "kind": "ServiceAccount", "name": account_name, "namespace": account_namespace }],
    }))
    .expect("the RoleBinding manifest matches its type");
    let post = PostParams::default();
    Api::<Role>::namespaced(admin.clone(), namespace).create(&post, &role).await?;
    Api::<RoleBinding>::namespaced(admin.clone(), namespace).create(&post, &binding).await?;
    Ok(())
}
