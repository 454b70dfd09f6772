// srunway's catalogue of module interfaces; see catalog.h.
#include "blueprints/catalog.h"

namespace srunway::blueprint {
namespace {

const std::map<std::string, ModuleInfo, std::less<>>& Catalog() {
  static const auto* catalog = new std::map<std::string, ModuleInfo, std::less<>>{
      {"modules/network/vpc",
       {{"project_id", "region", "deployment_name", "labels", "network_name", "subnetwork_name", "mtu"},
        {"network_name", "network_id", "network_self_link", "subnetwork", "subnetwork_name", "subnetwork_self_link"},
        {{"network_name", "string"}, {"subnetwork_name", "string"}, {"mtu", "number"}, {"enable_iap_ssh_ingress", "bool"}}}},
      {"modules/network/pre-existing-vpc",
       {{"project_id", "region", "network_name", "subnetwork_name"},
        {"network_name", "network_id", "network_self_link", "subnetwork", "subnetwork_name", "subnetwork_self_link"},
        {{"network_name", "string"}, {"subnetwork_name", "string"}}}},
      {"modules/network/multivpc",
       {{"project_id", "region", "deployment_name", "network_count", "network_name_prefix", "global_ip_address_range",
         "subnetwork_cidr_suffix"},
        {"additional_networks", "network_names", "network_self_links", "subnetwork_names", "subnetwork_self_links"},
        {{"network_count", "number"}, {"network_name_prefix", "string"}, {"global_ip_address_range", "string"},
         {"subnetwork_cidr_suffix", "number"}}}},
      {"modules/file-system/filestore",
       {{"project_id", "region", "zone", "deployment_name", "labels", "network_id", "local_mount", "size_gb",
         "filestore_tier"},
        {"network_storage", "install_nfs_client", "mount_runner"},
        {{"local_mount", "string"}, {"size_gb", "number"}, {"filestore_tier", "string"}}}},
      {"modules/file-system/pre-existing-network-storage",
       {{"server_ip", "remote_mount", "local_mount", "fs_type", "mount_options"},
        {"network_storage"},
        {{"server_ip", "string"}, {"remote_mount", "string"}, {"local_mount", "string"}, {"fs_type", "string"},
         {"mount_options", "string"}}}},
      {"community/modules/file-system/cloud-storage-bucket",
       {{"project_id", "region", "deployment_name", "labels", "local_mount", "mount_options", "random_suffix"},
        {"network_storage", "gcs_bucket_path"},
        {{"local_mount", "string"}, {"mount_options", "string"}, {"random_suffix", "bool"}}}},
      {"modules/scripts/startup-script",
       {{"project_id", "region", "deployment_name", "labels", "runners", "docker", "local_ssd_filesystem"},
        {"startup_script"},
        {{"runners", "list"}, {"docker", "map"}, {"local_ssd_filesystem", "map"}}}},
      {"modules/packer/custom-image",
       {{"project_id", "zone", "deployment_name", "labels", "network_project_id", "subnetwork_name", "startup_script",
         "machine_type", "disk_size", "source_image_family", "source_image_project_id", "image_family"},
        {},
        {{"machine_type", "string"}, {"disk_size", "number"}, {"image_family", "string"}, {"source_image_family", "string"},
         {"source_image_project_id", "list"}}}},
      {"community/modules/compute/schedmd-slurm-gcp-v6-nodeset",
       {{"project_id", "region", "zone", "labels", "subnetwork_self_link", "additional_networks", "startup_script",
         "instance_image", "instance_image_custom", "node_count_static", "node_count_dynamic_max", "machine_type"},
        {"nodeset"},
        {{"node_count_static", "number"}, {"node_count_dynamic_max", "number"}, {"machine_type", "string"},
         {"enable_placement", "bool"}, {"enable_spot_vm", "bool"}, {"reservation_name", "string"}, {"dws_flex", "map"},
         {"disk_size_gb", "number"}, {"disk_type", "string"}, {"enable_public_ips", "bool"}, {"bandwidth_tier", "string"},
         {"on_host_maintenance", "string"}, {"node_conf", "map"}, {"instance_image", "map"}, {"name", "string"},
         {"enable_smt", "bool"}, {"startup_script", "string"}, {"maintenance_interval", "string"}}}},
      {"community/modules/compute/schedmd-slurm-gcp-v6-partition",
       {{"nodeset", "nodeset_dyn", "nodeset_tpu"},
        {"partitions", "nodeset"},
        {{"partition_name", "word"}, {"exclusive", "bool"}, {"is_default", "bool"}, {"partition_conf", "map"}}}},
      {"community/modules/scheduler/schedmd-slurm-gcp-v6-login",
       {{"project_id", "region", "zone", "labels", "subnetwork_self_link", "instance_image", "machine_type"},
        {"login_nodes"},
        {{"machine_type", "string"}, {"name_prefix", "string"}, {"enable_login_public_ips", "bool"},
         {"disk_type", "string"}}}},
      {"community/modules/scheduler/schedmd-slurm-gcp-v6-controller",
       {{"project_id", "region", "zone", "deployment_name", "labels", "subnetwork_self_link", "network_storage",
         "partitions", "nodeset", "login_nodes", "instance_image", "instance_image_custom", "machine_type"},
        {"slurm_cluster_name", "slurm_controller_instance"},
        {{"machine_type", "string"}, {"enable_controller_public_ips", "bool"}, {"enable_cleanup_compute", "bool"},
         {"enable_external_prolog_epilog", "bool"}, {"prolog_scripts", "list"}, {"cloud_parameters", "map"},
         {"controller_startup_script", "string"}, {"login_startup_script", "string"}, {"slurm_conf_tpl", "string"}}}},
      // srunway's local target: the two-node cluster on one machine.
      {"srunway/local/nodeset",
       {{}, {"nodeset"},
        {{"nodes", "word"}, {"sockets", "number"}, {"cores_per_socket", "number"}, {"threads_per_core", "number"},
         {"gpus", "number"}}}},
      {"srunway/local/partition",
       {{"nodeset"}, {"partitions"},
        {{"partition_name", "word"}, {"is_default", "bool"}, {"max_time", "word"}}}},
      {"srunway/local/controller",
       {{"partitions", "state_dir", "port_base", "host", "address", "plugstack"}, {},
        {{"cluster_name", "word"}, {"state_dir", "word"}, {"port_base", "number"}, {"host", "word"},
         {"address", "word"}, {"plugstack", "string"}, {"task_prolog", "string"}, {"task_plugin", "string"},
         {"external_prolog_epilog", "bool"}}}},
  };
  return *catalog;
}

}  // namespace

std::string_view ModulePath(std::string_view source) {
  // A remote source names the toolkit path after "//" and may pin a version with "?ref=".
  if (size_t query = source.find('?'); query != std::string_view::npos) source = source.substr(0, query);
  if (size_t sub = source.find("//"); sub != std::string_view::npos) source = source.substr(sub + 2);
  while (source.ends_with('/')) source.remove_suffix(1);
  return source;
}

const ModuleInfo* FindModule(std::string_view source) {
  auto it = Catalog().find(ModulePath(source));
  return it == Catalog().end() ? nullptr : &it->second;
}

}  // namespace srunway::blueprint
